"""Which names hold an ``nn.Module``, by what the program does, never by how they are spelled.

A name holds a module when the file assigns it one (``bindings.module_names``), when every visible
caller passes one for the parameter (``bindings.module_parameter``), when the call being followed
passes one (the ``given`` names of a bound summary), or when the code uses it as only a module can
be used: ``.parameters()`` (handed to an optimizer), ``.named_parameters()``, ``.modules()``,
``.train()``, ``.eval()``, ... A field ``self.x`` is a module when some method of its class uses it
so, or when ``__init__`` stores a parameter there that holds one (used so in ``__init__``, or given
a module by the file's one construction of the class, also as a name holding one where it is
constructed, or by every construction the project shows);
``obj.x`` too, where ``obj`` holds an instance of such a class (``call_sites.path_instance``).
Anything else is not known to be a module."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.arguments import parameters
from fixer.analysis.bindings import is_module_construction, module_classes, module_names, module_parameter
from fixer.analysis.call_sites import argument_of, parameter_position, path_instance
from fixer.analysis.class_model import attribute_writes, class_methods, construction_argument, init_parameter
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.importers import project_constructions
from fixer.analysis.names import dotted, qualified
from fixer.analysis.scopes import CALLS, Scope, nodes_of, scope_of, statement_index
from fixer.context import FileContext

PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
# methods only an nn.Module offers (a tensor, an optimizer or a plain function has none of them)
MODULE_METHODS = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children", "named_children", "buffers",
     "named_buffers", "train", "eval", "register_buffer", "register_parameter", "register_module", "add_module",
     "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "get_submodule"}
)
# methods a module shares with an optimizer: a module's when the same name is also called
CALLABLE_MODULE_METHODS = MODULE_METHODS | {"zero_grad", "state_dict", "load_state_dict"}


def used_as_module(ctx: FileContext, scope: Scope, name: str) -> bool:
    """``name`` receives, in ``scope``, a method call only a module answers (or, called itself, one
    it shares with an optimizer)."""
    receivers, called = _module_uses(ctx, scope)
    return name in receivers or name in called


def _module_uses(ctx: FileContext, scope: Scope) -> tuple[frozenset[str], frozenset[str]]:
    """(receivers of module-only methods, called names that receive a module-or-optimizer method)."""

    def compute() -> tuple[frozenset[str], frozenset[str]]:
        only, shared, calls = set(), set(), set()
        for node in nodes_of(scope, CALLS):
            func = node.func
            if isinstance(func, ast.Attribute) and (receiver := dotted(func.value)):
                if func.attr in MODULE_METHODS:
                    only.add(receiver)
                elif func.attr in CALLABLE_MODULE_METHODS:
                    shared.add(receiver)
            if name := dotted(func):
                calls.add(name)
        return frozenset(only), frozenset(shared & calls)

    return ctx.memo(("module_uses", id(scope.node)), compute)


def module_fields(ctx: FileContext, cls: ast.ClassDef) -> frozenset[str]:
    """Attributes of ``self`` that hold a module, by the class's own uses and construction."""
    computing = ("module_fields: computing", id(cls))
    if computing in ctx.cache:
        return frozenset()  # asked again while its answer is computed: don't know

    def compute() -> frozenset[str]:
        ctx.cache[computing] = True
        try:
            return _module_fields(ctx, cls)
        finally:
            del ctx.cache[computing]

    return ctx.memo(("module_fields", id(cls)), compute)


def _module_fields(ctx: FileContext, cls: ast.ClassDef) -> frozenset[str]:
    methods = class_methods(ctx, cls)
    found = set()
    for method in methods.values():
        prefix = f"{method.self_name}."
        for receiver in _module_uses(ctx, method)[0] | _module_uses(ctx, method)[1]:
            if receiver.startswith(prefix) and "." not in receiver[len(prefix):]:
                found.add(receiver[len(prefix):])
    init = methods.get("__init__")
    for attr in _stored_parameters(ctx, cls) if init is not None else ():
        param = init_parameter(ctx, cls, attr)
        given = construction_argument(ctx, cls, attr, for_life=False)
        if used_as_module(ctx, init, param) or given is not None and _given_module(ctx, given) or _constructed_with_modules(ctx, cls, init, param):
            found.add(attr)
    return frozenset(found)


def _given_module(ctx: FileContext, given: ast.expr) -> bool:
    """The construction's argument holds a module: a module value, or a name that holds one where the
    construction reads it (``thing``, a parameter its function hands to an optimizer)."""
    return _is_module_value(ctx, given) or isinstance(given, ast.Name) and holds_module(ctx, scope_of(ctx, given), given.id)


def _stored_parameters(ctx: FileContext, cls: ast.ClassDef) -> list[str]:
    init = class_methods(ctx, cls)["__init__"]
    prefix = f"{init.self_name}."
    return [
        name[len(prefix):] for node in init.node.body if isinstance(node, ast.Assign)
        for target in node.targets for element in (target.elts if isinstance(target, ast.Tuple) else [target])
        if (name := dotted(element)) and name.startswith(prefix) and init_parameter(ctx, cls, name[len(prefix):])
    ]


def _constructed_with_modules(ctx: FileContext, cls: ast.ClassDef, init: Scope, param: str) -> bool:
    """Every construction of the class the project shows (here and in the files importing it, one at
    least) passes a module for ``__init__``'s parameter ``param``."""
    sites = project_constructions(ctx, cls)
    position = parameter_position(init, param)
    if not sites or position is None:
        return False
    for own, _, call in sites:
        argument = argument_of(call, param, position)
        if not isinstance(argument, ast.expr) or isinstance(argument, ast.Starred) or not _is_module_value(own, argument):
            return False
    return True


def _is_module_value(ctx: FileContext, value: ast.expr) -> bool:
    return dotted(value) in module_names(ctx) or is_module_construction(ctx, value, module_classes(ctx))


def holds_module(ctx: FileContext, scope: Scope, name: str, given: frozenset[str] = frozenset()) -> bool:
    """``name`` (dotted) holds an ``nn.Module`` in ``scope``, by the facts above; ``given`` are the
    parameters the call being followed passes a module for. A method's own ``self`` is left out:
    its fields are followed through the method's assignments."""
    if name == scope.self_name:
        return False
    if name in given or name in module_names(ctx) or used_as_module(ctx, scope, name):
        return True
    root, _, rest = name.partition(".")
    if rest and root == scope.self_name and "." not in rest and scope.class_node is not None:
        return rest in module_fields(ctx, scope.class_node)
    if rest:
        prefix, _, attr = name.rpartition(".")
        return prefix.count(".") <= 1 and ctx.memo(("instance_module_field", id(scope.node), name), lambda: _instance_field(ctx, scope, prefix, attr))
    return _is_parameter(scope, name) and module_parameter(ctx, scope, name)


def _instance_field(ctx: FileContext, scope: Scope, prefix: str, attr: str) -> bool:
    """``prefix.attr`` where ``prefix`` holds an instance of a class of this file
    (call_sites.path_instance) whose field ``attr`` holds a module."""
    cls = path_instance(ctx, scope, prefix)
    return cls is not None and attr in module_fields(ctx, cls)


def _is_parameter(scope: Scope, name: str) -> bool:
    return not isinstance(scope.node, ast.Module) and name in parameters(scope)


def module_argument(ctx: FileContext, scope: Scope, value: ast.expr, given: frozenset[str] = frozenset()) -> bool:
    """An argument that holds a module: a name that does (``holds_module``) or a construction."""
    name: Optional[str] = dotted(value)
    if name is not None:
        return holds_module(ctx, scope, name, given)
    return is_module_construction(ctx, value, module_classes(ctx))


def kept_on_module(ctx: FileContext, attr: str) -> bool:
    """The file keeps a value other than a module or a parameter in the attribute ``attr`` of a
    module: a module class of the file writes ``self.attr = value`` (``self.reg_loss = w.pow(2).sum()``),
    or code outside its classes stores to ``.attr`` of a name holding a module."""
    return attr in _kept_attributes(ctx)


def _kept_attributes(ctx: FileContext) -> frozenset[str]:
    def compute() -> frozenset[str]:
        classes = module_classes(ctx)
        found = set()
        homes = [(ctx, cls) for cls in statement_index(ctx).classes if cls.name in classes]
        homes += [found_class for name in classes if (found_class := imported_class(ctx, name)) is not None]
        for home, cls in homes:  # (a module class of another project file is read in its own file)
            own = module_classes(home)
            found |= {attr for attr, writes in attribute_writes(home, cls).items() if any(_kept(home, w.value, own) for w in writes)}
        modules = module_names(ctx)
        for assign in statement_index(ctx).assigns:
            for target in assign.targets:
                if isinstance(target, ast.Attribute) and dotted(target.value) in modules and _kept(ctx, assign.value, classes):
                    found.add(target.attr)
        return frozenset(found)

    return ctx.memo("kept_on_module", compute)


def _kept(ctx: FileContext, value: Optional[ast.expr], classes: set[str]) -> bool:
    """A stored value that may be a tensor: not a module, an ``nn.Parameter`` or a constant."""
    if value is None or isinstance(value, ast.Constant) or is_module_construction(ctx, value, classes):
        return False
    return not (isinstance(value, ast.Call) and qualified(ctx, value.func) in PARAMETER)
