"""PyTorch's (and NumPy's) own error texts, read in one place.

A typical slip often makes torch raise before the check sees any value (a float size from `/`, `.view` after a
transpose, two tensors that do not line up). The checks name such crashes by matching torch's words, and torch's
words change between releases: every pattern lives here, under a name, and tests/test_torch_errors.py makes the
pinned torch raise each one for real, so that a release that rewords a message fails a test instead of turning a
named crash into a bare one.

    from .torch_errors import BROADCAST, found
    sizes = found(BROADCAST, text)          # the match (groups a, b, dim), or None
"""
import re

# two operands that do not broadcast: "The size of tensor a (4) must match the size of tensor b (3) at
# non-singleton dimension 1"
BROADCAST = re.compile(r"size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\)"
                       r"(?: at non-singleton dimension (?P<dim>\d+))?")
# .expand / an in-place write into a smaller tensor: "The expanded size of the tensor (5) must match the existing
# size (3) at non-singleton dimension 1"
EXPAND = re.compile(r"expanded size of the tensor \((?P<new>\d+)\) must match the existing size \((?P<old>\d+)\)"
                    r"(?: at non-singleton dimension (?P<dim>\d+))?")
# a Linear (or @ of 2-D tensors) on the wrong width: "mat1 and mat2 shapes cannot be multiplied (6x4 and 5x3)"
MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((?P<r1>\d+)x(?P<c1>\d+) and "
                    r"(?P<r2>\d+)x(?P<c2>\d+)\)")
# a batched @ on the wrong sizes
BMM = re.compile(r"Expected size for first two dimensions of batch2 tensor to be: \[(?P<want>[\d, ]+)\] but got: "
                 r"\[(?P<got>[\d, ]+)\]")
# .view of a tensor whose memory is not in order (after a transpose)
VIEW = re.compile(r"view size is not compatible with input tensor's size and stride")
# .view / .reshape to sizes whose product is not the tensor's: "shape '[2, 3]' is invalid for input of size 5"
RESHAPE = re.compile(r"shape '\[(?P<shape>[-\d, ]*)\]' is invalid for input of size (?P<size>\d+)")
# a size given as a float (d_model / num_heads), to view, zeros, arange's size, a slice, range()
FLOAT_SIZE = re.compile(r"tuple of ints, ?but (?:got|found)[^.]*float|argument '(?:size|shape)'[^\n]*float"
                        r"|must be int, not float|'float' object cannot be interpreted as an integer"
                        r"|slice indices must be integers")
# torch.cat of tensors whose other axes differ: "Sizes of tensors must match except in dimension 1"
CAT = re.compile(r"Sizes of tensors must match except in dimension (?P<dim>\d+)")
# an axis the tensor lacks: "Dimension out of range (expected to be in range of [-1, 0], but got 1)"
DIM_RANGE = re.compile(r"Dimension out of range \(expected to be in range of \[(?P<low>-?\d+), (?P<high>-?\d+)\], "
                       r"but got (?P<got>-?\d+)\)")
# NumPy's form of the same: "axis 2 is out of bounds for array of dimension 2"
NUMPY_AXIS = re.compile(r"axis (?P<axis>-?\d+) is out of bounds for array of dimension (?P<ndim>\d+)")
# an embedding looked up with an id >= its number of rows
EMBEDDING_INDEX = re.compile(r"index out of range in self")
# an index past the end: "index 5 is out of bounds for dimension 0 with size 5"
INDEX_BOUNDS = re.compile(r"index (?P<index>-?\d+) is out of bounds for dimension (?P<dim>\d+) with size "
                          r"(?P<size>\d+)")
# F.cross_entropy / nll_loss given float targets
TARGET_DTYPE = re.compile(r"expected scalar type Long but found Float|expected target dtype to be Long|"
                          r"Expected floating point type for target with class probabilities")
# F.cross_entropy with the classes on the wrong axis: "Expected target size [2, 5], got [2, 3]"
TARGET_SIZE = re.compile(r"Expected target size \[(?P<want>[\d, ]+)\], got \[(?P<got>[\d, ]+)\]")
# F.cross_entropy with logits and targets that do not line up
BATCH_SIZE = re.compile(r"Expected input batch_size \((?P<input>\d+)\) to match target batch_size "
                        r"\((?P<target>\d+)\)")
# float32 meets float64 in a product
DTYPE_MIX = re.compile(r"expected (?:m1 and m2 to have the same dtype|scalar type \w+ but found \w+)"
                       r"|same dtype|Float but found Double|Double but found Float")
# x.max(dim=...) used as a tensor: it returns (values, indices)
RETURN_TYPES = re.compile(r"must be Tensor, not torch\.return_types\.(?P<op>max|min)")
# Python's `if`, `max()` or `and` on a tensor of several values
AMBIGUOUS_BOOL = re.compile(r"Boolean value of Tensor with more than one value is ambiguous")
# math.exp / float() on a tensor of several values
ONE_ELEMENT = re.compile(r"only one element tensors can be converted to Python scalars")
# an in-place update whose right side broadcasts to a larger shape: "output with shape [3] doesn't match the
# broadcast shape [3, 3]"
OUTPUT_BROADCAST = re.compile(r"output with shape \[(?P<shape>[\d, ]*)\] doesn't match the broadcast shape "
                              r"\[(?P<broadcast>[\d, ]*)\]")
# pack_padded_sequence with lengths not sorted
ENFORCE_SORTED = re.compile(r"must be sorted in decreasing order when `enforce_sorted` is True")
# LayerNorm over the wrong width
NORMALIZED_SHAPE = re.compile(r"Given normalized_shape=\[(?P<norm>[\d, ]+)\], expected input with shape "
                              r"\[\*, (?P<want>[\d, ]+)\], but got input of size\s*\[(?P<got>[\d, ]+)\]")
# a boolean index of the wrong shape
MASK_INDEX = re.compile(r"The shape of the mask \[(?P<mask>[\d, ]+)\] at index (?P<index>\d+) does not match the "
                        r"shape of the indexed tensor \[(?P<tensor>[\d, ]+)\]")
# torch.split with sizes that do not add up
SPLIT_SIZES = re.compile(r"split_with_sizes expects split_sizes to sum exactly to (?P<total>\d+) \(input tensor's "
                         r"size at dimension (?P<dim>-?\d+)\), but got split_sizes=\[(?P<sizes>[\d, ]*)\]")
# a tensor argument given a Python number: "sqrt(): argument 'input' (position 1) must be Tensor, not int"
NOT_TENSOR = re.compile(r"(?P<op>\w+)\(\): argument '(?P<arg>\w+)' \(position (?P<position>\d+)\) must be Tensor, "
                        r"not (?P<got>\w+)")
# an embedding looked up with float ids
INDICES_DTYPE = re.compile(r"Expected tensor for argument #1 'indices' to have one of the following scalar types")
# a boolean tensor used where torch wants numbers (e.g. `-mask`)
BOOL_NEGATION = re.compile(r"Negation, the `-` operator, on a bool tensor is not supported")
# a recurrent layer's state of the wrong rank for its input: "For batched 3-D input, hx should also be 3-D but got
# 2-D tensor" (a state (B, d) where it takes (num_layers, B, d)), or "For unbatched 2-D input, ..." (an input (B, d))
RNN_HX = re.compile(r"For (?P<input>batched 3-D|unbatched 2-D) input, hx should also be (?P<want>\d)-D but got "
                    r"(?P<got>\d)-D")
# a slice (narrow) past the end of an axis: "start (12) + length (1) exceeds dimension size (12)" (e.g. a packed
# batch whose lengths run along another axis than the one they count)
NARROW = re.compile(r"start \((?P<start>\d+)\) \+ length \((?P<length>\d+)\) exceeds dimension size "
                    r"\((?P<size>\d+)\)")
# a plain tensor assigned to a module's parameter (e.g. `self.head.weight = self.embed.weight.T`)
PARAMETER_ASSIGN = re.compile(r"cannot assign '(?P<got>[\w.]+)' as parameter '(?P<name>\w+)' \(torch\.nn\.Parameter "
                              r"or None expected\)")
# an op given arguments of the wrong types: "repeat_interleave() received an invalid combination of arguments -
# got (float, dim=int), ..."
INVALID_ARGS = re.compile(r"(?P<op>\w+)\(\) received an invalid combination of arguments - got \((?P<got>[^)]*)\)")
# a module's submodule or parameter set before nn.Module's own __init__ ran (super().__init__() missing or late)
MODULE_INIT = re.compile(r"cannot assign (?:module|parameters?) before Module\.__init__\(\) call")
# an integer tensor made a parameter (nn.Parameter(torch.tensor(0)))
GRAD_DTYPE = re.compile(r"Only Tensors of floating point and complex dtype can require gradients")
# F.conv1d given (B, T, C) where it takes (B, C, T): "expected input[2, 11, 3] to have 3 channels, but got 11"
CONV_CHANNELS = re.compile(r"expected input\[(?P<input>[\d, ]+)\] to have (?P<want>\d+) channels, but got "
                           r"(?P<got>\d+) channels")
# a float mask used where torch wants a boolean one (`~mask`, masked_fill)
BOOL_MASK = re.compile(r"\(operator\.invert\) is only implemented on integer and Boolean|masked_fill_? only supports "
                       r"boolean masks")
# torch.stack of tensors of different sizes: "stack expects each tensor to be equal size, but got [2, 3, 4, 5] at
# entry 0 and [2, 3, 8, 5] at entry 1"
STACK = re.compile(r"stack expects each tensor to be equal size, but got \[(?P<a>[\d, ]*)\] at entry (?P<i>\d+) and "
                   r"\[(?P<b>[\d, ]*)\] at entry (?P<j>\d+)")

ALL = {name: value for name, value in dict(globals()).items() if isinstance(value, re.Pattern)}


def found(pattern, text):
    """The match of `pattern` (one of the patterns above) in the first line of torch's message `text`, or None."""
    return pattern.search(text.partition("\n")[0]) or (pattern.search(text) if "\n" in text else None)
