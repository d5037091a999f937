"""What lesson 08's exercises share when the learner's code crashes: torch's words for a float size, a view of a
transposed tensor and a view to sizes that do not fit (torch_errors.py), and the course's attention refusing keys
and values of different lengths, each named by the exercise's registered mistake."""
from ..evaluation import crashes_named
from ..mistakes import Mistake
from ..torch_errors import FLOAT_SIZE, RESHAPE, VIEW, found

# the course's own attention (course_utils/attention.py) refuses keys and values of different lengths
KV_LENGTHS = "k and v must have the same length"
NOTEBOOK = "the check's sizes are not the notebook's running example (d_model = 12, num_heads = 3)"


def float_size(shows):
    return Mistake("float_size", "a size is a float (a true division: d_model / num_heads = 4.0): the sizes of a view, "
                   "a reshape, a new tensor or a slice are whole numbers", hint="d_head = d_model // num_heads",
                   shows=shows)


def view_transposed(shows):
    return Mistake("view_transposed", "a view cannot merge or split the axes of a transposed tensor: after a "
                   "transpose its numbers are no longer in memory order (not contiguous)",
                   hint=".reshape(...), or .contiguous().view(...)", shows=shows)


def reshape_sizes(sizes, hint, shows):
    """A view or reshape to sizes whose product is not the tensor's; `sizes`: where each size must come from."""
    return Mistake("reshape_sizes", "the shape {shape} asked of a view or reshape does not fit the tensor, which holds "
                   "{size} numbers: " + sizes + "; " + NOTEBOOK, hint=hint, shows=shows)


def _symptom_of(M):
    def symptom(text, _check):
        first = text.partition("\n")[0]
        if "float_size" in M and found(FLOAT_SIZE, first):
            return M.float_size
        if "view_transposed" in M and found(VIEW, first):
            return M.view_transposed
        if "kv_lengths" in M and KV_LENGTHS in first:
            return M.kv_lengths
        sizes = found(RESHAPE, first)
        if "reshape_sizes" in M and sizes:
            return M.reshape_sizes.at(shape=f"[{sizes['shape']}]", size=sizes["size"])
        return None
    return symptom


def naming_crashes(M):
    """A decorator: the check's learner crashes that a mistake of the registry `M` explains are named by it."""
    return crashes_named(_symptom_of(M))
