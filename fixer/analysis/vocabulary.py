"""What the methods of Python's own containers do to their holder, in one place: every analysis that
asks "does this call put a value into a container (and keep it there)?" and the runtime repair's
"does this statement change a container?" read these sets.

The sequence methods (``list``, ``deque``) are named by nothing else a training program calls, so
their name says what the call does. ``add``, ``put``, ``push`` and ``update`` are just as often
methods of the program's own classes (a meter's ``update(loss)`` that keeps a float): an analysis
reads them as container additions only where its receiver is known to be a container, or where
being wrong only makes it more careful. Also the tensor methods that may return a view, and
torch.nn's classes: constructing one builds a module, which holds what it is given and computes
nothing. Data only; no import from the rest of the analysis."""

from __future__ import annotations

import re

SEQUENCE_ADDS_ONE = frozenset({"append", "appendleft", "insert"})  # keeps its last argument
SEQUENCE_ADDS_MANY = frozenset({"extend", "extendleft"})  # keeps the elements of its argument
SEQUENCE_ADDS = SEQUENCE_ADDS_ONE | SEQUENCE_ADDS_MANY
SET_ADDS = frozenset({"add"})
QUEUE_ADDS = frozenset({"put", "push"})
MERGES = frozenset({"update"})  # keeps the items of a mapping (or of keyword arguments)
KEYED_ADDS = frozenset({"setdefault", "__setitem__"})  # keeps a value under a key
ADDS = SEQUENCE_ADDS | SET_ADDS | QUEUE_ADDS | MERGES | KEYED_ADDS  # every call that puts a value into a container
REMOVES = frozenset({"pop", "popleft", "popitem", "remove", "discard", "clear"})
CHANGES = ADDS | REMOVES  # every call that changes what a container holds

# tensor methods that may return a view of their receiver (it keeps the base tensor, and its graph, alive)
TENSOR_VIEWS = frozenset({"view", "view_as", "reshape", "reshape_as", "flatten", "squeeze", "unsqueeze", "permute",
                          "transpose", "t", "expand", "expand_as", "narrow", "select", "unbind", "split", "chunk",
                          "contiguous", "to", "float", "double", "half", "type_as", "cpu", "cuda", "__getitem__"})

# ``torch.nn.Linear``, ``torch.nn.ParameterList``, ``torch.nn.utils.rnn.PackedSequence``: torch.nn names its
# classes in CapWords and its functions in lower case (``torch.nn.functional.relu``)
TORCH_NN_CLASS = re.compile(r"^torch\.nn\.(?:[a-z_][a-z0-9_]*\.)*[A-Z]\w*$")


def constructs_torch_nn_class(qualified_name: str) -> bool:
    return TORCH_NN_CLASS.match(qualified_name) is not None

# torch.nn.Module's own methods that never touch a parameter's gradient (``self.parameters()`` in a
# subclass's method is one of these, not an unknown inherited method that may clear gradients)
MODULE_METHODS_KEEPING_GRADIENTS = frozenset(
    {"parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
     "named_modules", "state_dict", "train", "eval", "forward", "extra_repr", "get_submodule", "get_parameter",
     "get_buffer", "register_buffer", "register_parameter", "add_module"}
)
