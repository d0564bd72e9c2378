"""The width-4 block's input and parameters, made exactly as tests/block/block_init.hpp does.

splitmix64 (state advanced by 0x9E3779B97F4A7C15), each output z -> u = (z >> 11) * 2^-53 in [0, 1)
-> 2u - 1 in [-1, 1); tensor value = offset + scale * (2u - 1). Every step is exact or a single
IEEE double rounding, so Python and C++ produce identical doubles. Shared by block_reference.py
(pure Python) and block.py (PyTorch).
"""

SEED = 20240527
T, C, NH = 5, 4, 2
HS = C // NH
LAYER_NORM_EPS = 1e-5

MASK64 = (1 << 64) - 1

# (name, element count, offset, scale), in draw order: the same table as kTensorRecipes.
RECIPES = [
    ("x", T * C, 0.0, 1.0),
    ("ln_1.weight", C, 1.0, 0.25),
    ("ln_1.bias", C, 0.0, 0.1),
    ("attn.c_attn.weight", C * 3 * C, 0.0, 0.5),
    ("attn.c_attn.bias", 3 * C, 0.0, 0.1),
    ("attn.c_proj.weight", C * C, 0.0, 0.5),
    ("attn.c_proj.bias", C, 0.0, 0.1),
    ("ln_2.weight", C, 1.0, 0.25),
    ("ln_2.bias", C, 0.0, 0.1),
    ("mlp.c_fc.weight", C * 4 * C, 0.0, 0.5),
    ("mlp.c_fc.bias", 4 * C, 0.0, 0.1),
    ("mlp.c_proj.weight", 4 * C * C, 0.0, 0.5),
    ("mlp.c_proj.bias", C, 0.0, 0.1),
]


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def symmetric(self):
        """Uniform in [-1, 1): (z >> 11) * 2^-53 is exact, doubling and subtracting 1 are exact."""
        return 2.0 * (float(self.next() >> 11) * 2.0**-53) - 1.0


def host_values(seed=SEED):
    """{name: [float, ...]} for the input and every parameter, row-major."""
    rng = SplitMix64(seed)
    values = {}
    for name, size, offset, scale in RECIPES:
        values[name] = [offset + scale * rng.symmetric() for _ in range(size)]
    return values


# Output tensors recorded in the golden file, in forward order, with their shapes.
OUTPUT_SHAPES = [
    ("ln1", (T, C)),
    ("qkv", (T, 3 * C)),
    ("att", (NH, T, T)),
    ("attn_y", (T, C)),
    ("proj", (T, C)),
    ("x1", (T, C)),
    ("ln2", (T, C)),
    ("fc", (T, 4 * C)),
    ("gelu", (T, 4 * C)),
    ("mlp", (T, C)),
    ("out", (T, C)),
]


def golden_document(producer, values, outputs, note):
    """The JSON object written to tests/golden/block4.json (floats are written with repr)."""
    return {
        "producer": producer,
        "regenerate": "python3 tools/oracle/block_reference.py  (or, with PyTorch: python3 tools/oracle/block.py)",
        "note": note,
        "format": 1,
        "seed": SEED,
        "dims": {"T": T, "C": C, "NH": NH, "HS": HS},
        "layer_norm_eps": LAYER_NORM_EPS,
        "inputs": {"x": values["x"]},
        "params": {name: values[name] for name, _, _, _ in RECIPES if name != "x"},
        "outputs": {name: outputs[name] for name, _ in OUTPUT_SHAPES},
        "output_shapes": {name: list(shape) for name, shape in OUTPUT_SHAPES},
    }
