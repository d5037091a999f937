"""What lesson 13's linear-attention check says for each planted mistake (lesson13_mistakes.linear's kinds)."""
DENOMINATOR = "the denominator is φ(q_t)ᵀ z with z = Σ_j φ(k_j): the kernel of the query with every key, summed"
LINEAR = {
    "S_from_q": ("S is built from the queries, Σ_t φ(q_t) v_tᵀ: the numerator's S sums over the KEYS, "
                 "S = Σ_j φ(k_j) v_jᵀ = φ(k)ᵀ v (d_k x d_v), then φ(q_t)ᵀ S for each query"),
    "no_denominator": ("the output is not normalised: divide φ(q_t)ᵀ(Σ_j φ(k_j) v_jᵀ) by φ(q_t)ᵀ Σ_j φ(k_j), the sum "
                       "of the kernel over the keys, so that the weights of each query sum to 1"),
    "phi_missing": ("φ is missing: linear attention needs positive features, φ(x) = elu(x) + 1, applied to q and to k "
                    "(with raw q·k the 'weights' can be negative and the denominator 0)"),
    "phi_q_only": "φ is applied to q only: apply φ(x) = elu(x) + 1 to the keys too",
    "phi_k_only": "φ is applied to k only: apply φ(x) = elu(x) + 1 to the queries too",
    "elu_no_plus1": ("φ(x) = elu(x) is negative for x < 0: the feature map is elu(x) + 1 > 0, so that every weight "
                     "φ(q)·φ(k) is positive"),
    "relu": ("φ(x) = relu(x) is 0 for every negative entry (a query or key can then get no weight at all): the "
             "feature map is elu(x) + 1 > 0"),
    "elu_shifted": "φ(x) = elu(x + 1): the +1 goes outside, φ(x) = elu(x) + 1 (F.elu(x) + 1)",
    "phi_exp": ("φ(x) = exp(x): the exercise's feature map is elu(x) + 1 (exp of each feature is not the softmax's "
                "kernel, and it overflows)"),
    "relu_plus1": "φ(x) = relu(x) + 1: the feature map is elu(x) + 1 (F.elu, smooth below 0)",
    "phi_softmax": "φ(x) = softmax(x) over the features: the feature map is elu(x) + 1, applied to each feature alone",
    "z_scalar": ("the denominator is one number for every query: it is φ(q_t)ᵀ z, one number per QUERY, with "
                 "z = Σ_j φ(k_j) a vector of d_k numbers (φ(q) @ z)"),
    "causal": ("query t reads only the keys up to t (cumulative sums): this exercise is NOT causal, every query "
               "reads S and z summed over ALL the keys"),
    "denominator_broadcast": ("the denominator divides the wrong axis: φ(q_t)ᵀ z is one number per QUERY; divide each "
                              "row of φ(q) S by it (keep its last axis of size 1, e.g. (φ(q) @ z)[..., None])"),
    "phi_v": ("φ is applied to the values too: only q and k go through φ (the kernel φ(q)·φ(k) replaces exp(q·k)); "
              "the values enter as they are"),
    "z_wrong_axis": ("the denominator sums φ(k) over the wrong axis: z = Σ_j φ(k_j) sums over the KEYS (dim=-2), one "
                     "vector of d_k numbers"),
    "normalised_over_queries": ("the weights are normalised over the queries: each query's weights sum to 1 over "
                                "the keys, φ(q_t)ᵀ z with z = Σ_j φ(k_j)"),
    "scaled": ("q and k are scaled by 1/√d before φ: linear attention applies φ to q and k as they are (there is no "
               "softmax to keep from saturating)"),
    "softmax": ("this is softmax attention: linear attention replaces exp(q·k/√d) by the kernel φ(q)·φ(k), "
                "φ(x) = elu(x) + 1"),
    "quadratic": ("{symptom}: that is the T_q x T_k matrix of weights φ(q_t)·φ(k_j), which linear attention never "
                  "forms. Compute S = Σ_j φ(k_j) v_jᵀ (d_k x d_v) and z = Σ_j φ(k_j) first, then φ(q) S / φ(q) z: "
                  "time and memory linear in T"),
}
LINEAR["k_no_plus1"] = "φ(k) is elu(k), without the +1 (written for q only): φ(x) = elu(x) + 1 for the keys too"
LINEAR["gelu_plus1"] = "φ is gelu(x) + 1: the lesson's feature map is elu(x) + 1 (positive, exp(x) for x < 0)"
LINEAR["softplus"] = "φ is softplus(x): the lesson's feature map is elu(x) + 1"

