"""Prints the operations of the installed novu-py, one JSON object a line: its accessor from the client
(`subscribers.notifications.list`), HTTP method, path template and operation id. Offline: it reads the
package's generated source and imports nothing of it (run by tests/it/compatibility.rs).

Each generated method of a sub-SDK class builds its request with `self._build_request(method=…, path=…)` and
names its `operation_id`; the async twin (`async def …_async`) makes the same request and is skipped. The
accessor tree starts at `Novu` (`sdk.py`): a class's annotated attributes (`notifications: NovuNotifications`,
`"contexts": "Contexts"` on `Novu`) are its sub-SDKs.
"""

import ast
import importlib.util
import json
import pathlib
import sys


def literal(call, name):
    """The constant value of keyword `name` of `call`, or None."""
    for kw in call.keywords:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def operation(fn):
    """(method, path, operation id) of the request `fn` builds, or None when it builds none."""
    method = path = op_id = None
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr == "_build_request":
            method, path = literal(node, "method"), literal(node, "path")
        op_id = op_id or literal(node, "operation_id")
    if method is None:
        return None
    if path is None or op_id is None:
        sys.exit(f"{fn.name}: a request without a constant path or operation_id")
    return method, path, op_id


def classes(package):
    """Every class of the package's top-level modules: name -> (sub-SDK attributes, operations)."""
    found = {}
    for module in sorted(package.glob("*.py")):
        for cls in ast.parse(module.read_text(), str(module)).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            subs, ops = {}, {}
            for item in cls.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    ann = item.annotation
                    kind = ann.value if isinstance(ann, ast.Constant) else getattr(ann, "id", None)
                    if isinstance(kind, str):
                        subs[item.target.id] = kind
                elif isinstance(item, ast.FunctionDef) and (op := operation(item)):
                    ops[item.name] = op
            if cls.name in found:
                sys.exit(f"class {cls.name} is defined twice")
            found[cls.name] = (subs, ops)
    return found


def walk(found, name, prefix, out):
    subs, ops = found[name]
    for method_name, (method, path, op_id) in ops.items():
        out.append({"accessor": prefix + method_name, "method": method, "path": path, "operationId": op_id})
    for attr, kind in subs.items():
        if kind in found and (found[kind][0] or found[kind][1]):
            walk(found, kind, f"{prefix}{attr}.", out)


def main():
    package = pathlib.Path(importlib.util.find_spec("novu_py").origin).parent
    found = classes(package)
    out = []
    walk(found, "Novu", "", out)
    defined = sum(len(ops) for _, ops in found.values())
    if len(out) != defined:
        sys.exit(f"{defined} operations defined, {len(out)} reachable from Novu: the accessor tree was misread")
    for op in out:
        print(json.dumps(op))


main()
