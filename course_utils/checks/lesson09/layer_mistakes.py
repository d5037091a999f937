"""The mistakes both layer exercises can make (encoder_layer.py, decoder_layer.py): in the Add & Norm blocks, their
order, their LayerNorms and their dropouts. `shared(answer, n)` gives the registry entries of a layer of n blocks,
each shown by the exercise's class with the slip (`answer(**how)`, how: layers.run_layer's arguments);
`structure_variants` and `dropout_variants` give what each slip's layer outputs on the check's inputs, from the same
definitions (layers.py), with the words' fields filled in for the block where it sits."""
import itertools

from ..core import Mistake
from .layers import formula, one, placement


def fields(layer, i, norm_first, **more):
    """The words' fields of block i of `layer` (a superset: each Mistake takes the ones it names)."""
    names, n = layer["names"], len(layer["names"])
    return dict(name=names[i], k=i + 1, how=formula(layer, i, norm_first), placement=placement(norm_first),
                earlier=names[i - 1] if i else "", first=names[0], has="post" if norm_first else "pre",
                other="pre" if norm_first else "post", norm_first=norm_first,
                ks=", ".join(f"dropout{b + 1}" for b in range(n)),
                norms=", ".join(f"norm{b + 1}" for b in range(n - 1)) + f" and norm{n}",
                rule=", ".join(f"{name} (norm{b + 1})" for b, name in enumerate(names)), **more)


def _order(n):
    return (1, 0) + tuple(range(2, n))


def shared(answer, n):
    """The registry entries of a layer of n blocks; each shown in block 1 (the second) where it sits in one block."""
    def in_block(kind):
        return answer(kinds=one(kind, 1, n))

    _add = "before the residual adds it"
    entries = [
        Mistake("no_residual", "the residual connections are missing: every block adds its sub-layer's output to its "
                "input x, in {placement}", hint="{how}", shows=answer(kinds="no_residual")),
        Mistake("wrong_placement", "this is the {has}-norm layer, but norm_first={norm_first} asks for {placement}",
                hint="{how}", shows=answer(kinds="swapped")),
        Mistake("no_norm", "the LayerNorms are missing: in {placement}", hint="{how}", shows=answer(kinds="no_norm")),
        Mistake("norm_output", "the LayerNorms are applied to the sub-layers' outputs, inside the residuals: in "
                "{placement}", hint="{how}", shows=answer(kinds="norm_output")),
        Mistake("norm_residual", "the residuals start from the normalised x: in pre-norm, y = LayerNorm(x) feeds only "
                "the sub-layer, and its output is added to the ORIGINAL x", hint="{how}",
                shows=answer(kinds="norm_residual")),
        Mistake("block_no_residual", "the residual connection around the {name} is missing: its input x is added back "
                "to its output, in {placement}", hint="{how}", shows=in_block("no_residual")),
        Mistake("block_no_norm", "the {name}'s LayerNorm, norm{k}, is missing: in {placement}", hint="{how}",
                shows=in_block("no_norm")),
        Mistake("block_norm_output", "norm{k} is applied to the {name}'s output, inside the residual: in {placement}",
                hint="{how}", shows=in_block("norm_output")),
        Mistake("block_norm_residual", "the residual around the {name} starts from the normalised x: in pre-norm, "
                "y = LayerNorm(x) feeds only the sub-layer, and its output is added to the ORIGINAL x", hint="{how}",
                shows=in_block("norm_residual")),
        Mistake("block_reads_input", "the {name} reads the layer's INPUT instead of the output of the {earlier} "
                "block: each sub-layer works on the x the block before it updated", hint="{how}",
                shows=in_block("reads_input")),
        Mistake("block_placement", "the {name} has the {other}-norm placement, the other sub-layers the {has}-norm "
                "one: norm_first={norm_first} asks for {placement}", hint="{how}", shows=in_block("swapped")),
        Mistake("block_reads_first_norm", "the {name} reads the LayerNorm of the layer's INPUT (the y computed before "
                "the {first}): in pre-norm the updated x is normalised again, by norm{k}", hint="{how}",
                shows=in_block("reads_y")),
        Mistake("other_norm", "the {name} uses norm{j} instead of its own norm{k}", hint="{how}",
                shows=answer(norms=tuple(f"norm{1 if b == 1 else b + 1}" for b in range(n)))),
        Mistake("blocks_order", "the {runs} runs before the {before} (your order: {yours}): the order is {rule}",
                shows=answer(order=_order(n))),
        Mistake("order_norms_kept", "the {runs} runs before the {before} (your order: {yours}; the LayerNorms in "
                "their places): the order is {rule}", shows=answer(order=_order(n), norms=tuple(
                    f"norm{_order(n).index(b) + 1}" for b in range(n)))),
        Mistake("no_dropout", "in training your layer applies no dropout: {ks} go on the sub-layers' outputs, " + _add,
                hint="{how}", shows=answer(kinds="no_drop")),
        Mistake("dropout_on_sums", "dropout is applied to the residual sums: it goes on each sub-layer's output "
                "alone, " + _add, hint="{how}", shows=answer(kinds="drop_sum")),
        Mistake("dropout_after_norms", "dropout is applied after the LayerNorms: it goes on each sub-layer's output, "
                + _add, hint="{how}", shows=answer(kinds="drop_after_norm")),
        Mistake("dropout_on_inputs", "dropout is applied to the sub-layers' inputs: it goes on their outputs, " + _add,
                hint="{how}", shows=answer(kinds="drop_input")),
        Mistake("block_no_dropout", "in training the {name}'s output gets no dropout (dropout{k}): it goes on the "
                "sub-layer's output, " + _add, hint="{how}", shows=in_block("no_drop")),
        Mistake("block_dropout_on_sum", "dropout{k} is applied to the residual sum: it goes on the {name}'s output "
                "alone, " + _add, hint="{how}", shows=in_block("drop_sum")),
        Mistake("block_dropout_after_norm", "dropout{k} is applied after the LayerNorm norm{k}: it goes on the "
                "{name}'s output, " + _add, hint="{how}", shows=in_block("drop_after_norm")),
        Mistake("block_dropout_on_input", "dropout{k} is applied to the {name}'s input: it goes on its output, " + _add,
                hint="{how}", shows=in_block("drop_input")),
    ]
    if n >= 3:    # (with two blocks, one LayerNorm for both IS the second block using norm1)
        entries.append(Mistake("one_norm", "one LayerNorm serves every sub-layer: each has its own ({norms}, with "
                               "their own learned gain and bias)", shows=answer(norms=("norm1",) * n)))
    return entries


def structure_variants(M, layer, output, norm_first, norms):
    """{the mistake, its words filled in: the layer's output with it} for the slips of the Add & Norm blocks, their
    order and their LayerNorms; output(**how) computes the layer with a slip (layers.encoder_output or
    decoder_output on the reference's modules), `norms` are the reference's LayerNorms."""
    n = len(layer["names"])
    everywhere = fields(layer, 0, norm_first)
    variants = {M.no_residual.at(**everywhere): output(kinds="no_residual"),
                M.wrong_placement.at(**everywhere): output(kinds="swapped"),
                M.no_norm.at(**everywhere): output(kinds="no_norm"),
                M.norm_output.at(**everywhere): output(kinds="norm_output")}
    if n >= 3:
        variants[M.one_norm.at(**everywhere)] = output(norms=[norms[0]] * n)
    if norm_first:
        variants[M.norm_residual.at(**everywhere)] = output(kinds="norm_residual")
    for i in range(n):
        where = fields(layer, i, norm_first)
        for key, kind in (("block_no_residual", "no_residual"), ("block_no_norm", "no_norm"),
                          ("block_norm_output", "norm_output"), ("block_norm_residual", "norm_residual"),
                          ("block_reads_input", "reads_input"), ("block_placement", "swapped")):
            if (i or kind != "reads_input") and (norm_first or kind != "norm_residual"):
                variants[M[key].at(**where)] = output(kinds=one(kind, i, n))
        if i and norm_first:
            variants[M.block_reads_first_norm.at(**where)] = output(kinds=one("reads_y", i, n))
        for j in range(n):
            if j != i:
                variants[M.other_norm.at(**where, j=j + 1)] = output(norms=[norms[j] if b == i else norms[b]
                                                                            for b in range(n)])
    for order in itertools.permutations(range(n)):
        first = next((p for p, block in enumerate(order) if block != p), None)
        if first is not None:
            words = fields(layer, 0, norm_first, runs=layer["names"][order[first]], before=layer["names"][first],
                           yours=", ".join(layer["names"][block] for block in order))
            variants[M.blocks_order.at(**words)] = output(order=order)
            # the sub-layers swapped, their LayerNorms (and dropouts) left in their places
            variants[M.order_norms_kept.at(**words)] = output(order=order, norms=[norms[order.index(b)]
                                                                                 for b in range(n)])
    return variants


def dropout_variants(M, layer, output, norm_first, seeded):
    """{the mistake, its words filled in: the layer's output in training with dropout in the wrong place} (the
    reference's dropouts on); seeded(fn, **how): fn(**how) with the check's dropout masks."""
    n = len(layer["names"])
    kinds = ("drop_sum", "drop_input") if norm_first else ("drop_sum", "drop_after_norm", "drop_input")
    everywhere = {"no_drop": "no_dropout", "drop_sum": "dropout_on_sums", "drop_after_norm": "dropout_after_norms",
                  "drop_input": "dropout_on_inputs"}
    in_block = {"no_drop": "block_no_dropout", "drop_sum": "block_dropout_on_sum",
                "drop_after_norm": "block_dropout_after_norm", "drop_input": "block_dropout_on_input"}
    variants = {M[everywhere[kind]].at(**fields(layer, 0, norm_first)): seeded(output, kinds=kind)
                for kind in ("no_drop",) + kinds}
    for i in range(n):
        for kind in ("no_drop",) + kinds:
            variants[M[in_block[kind]].at(**fields(layer, i, norm_first))] = seeded(output, kinds=one(kind, i, n))
    return variants
