"""Rotary positions written other ways, for exercise 6: `rope_complex`, the complex form the check takes its right
values from (z_i = x_i + i x_{i+d/2}, multiplied by e^{i m θ_i}), and `rope_variant`, the rotation with one typical
mistake, the single definition each registry entry's wrong answer runs."""
import torch


def rope_complex(x, positions, base):
    """The complex form: z_i = x_i + i x_{i+d/2}, multiplied by e^{i m θ_i} (float64)."""
    d = x.size(-1)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double())
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones(()).double(), positions.double()[:, None] * theta)
    return torch.cat([z.real, z.imag], -1)


def rope_variant(x, positions, base=10000.0, kind="ok"):
    """apply_rope (float64) with the mistake `kind` planted."""
    d = x.size(-1)
    x = x.double()
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"freq_no_two": -i / d, "freq_sign": 2 * i / d, "freq_full": -2 * i / (d // 2),
                "freq_int": torch.floor(-2 * i / d), "freq_shifted": -2 * (i + 1) / d}.get(kind, -2 * i / d)
    theta = (10000.0 if kind == "base_ignored" else base) ** exponent
    m = positions.double()
    m = {"pos_plus_one": m + 1, "arange": torch.arange(x.size(-2), dtype=torch.float64),
         "arange1": torch.arange(1, x.size(-2) + 1, dtype=torch.float64)}.get(kind, m)
    angle = theta[None, :] ** m[:, None] if kind == "power" else m[:, None] * theta
    if kind == "angle_sign":
        angle = -angle
    if kind == "degrees":
        angle = torch.deg2rad(angle)
    cos, sin = angle.cos(), angle.sin()
    if kind == "sin_cos":
        cos, sin = sin, cos
    if kind == "interleaved":              # pairs (2i, 2i+1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2], out[..., 1::2] = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return out
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    halves = [x1 * cos - x2 * sin, x1 * sin + x2 * cos]
    if kind == "neighbours_halves":        # pairs read as neighbours (2i, 2i+1), written back as halves
        n1, n2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([n1 * cos - n2 * sin, n1 * sin + n2 * cos], -1)
    if kind == "stacked":                  # the halves' rotated values written pair by pair
        return torch.stack(halves, -1).flatten(-2)
    if kind == "scaled":                   # not a rotation: every length grows by 10 %
        return torch.cat(halves, -1) * 1.1
    if kind == "first_half_only":          # only the first half rotated, the second kept as it was
        return torch.cat([halves[0], x2], -1)
    return torch.cat(halves[::-1] if kind == "halves_swapped" else halves, -1)
