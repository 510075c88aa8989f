"""List the public functions of the user's helper modules without running them.

Compiled into ptc-mcp (environment/CMakeLists.txt) and run as the code of a sandboxed run whose
read-only folder holds the helpers (one .py file or package folder per module). It reads each
file with `ast` only: nothing the user wrote is imported or executed. Arguments: folders to
scan; with none, the first entry of PYTHONPATH, which is the run's read-only folder.

Prints one JSON object:
  {"tools": [{"module", "function", "signature", "docstring", "inputSchema", "file", "line"}],
   "errors": [{"module", "file", "line", "error"}]}
A function is listed when its name has no leading underscore, it sits at the top level of a
module whose own name has none, and it has a docstring. A file that does not parse is one error
entry; the other files are still listed.
"""

import ast
import json
import os
import sys

_SIMPLE = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "list": {"type": "array"},
    "List": {"type": "array"},
    "tuple": {"type": "array"},
    "Tuple": {"type": "array"},
    "set": {"type": "array"},
    "Set": {"type": "array"},
    "Sequence": {"type": "array"},
    "dict": {"type": "object"},
    "Dict": {"type": "object"},
    "Mapping": {"type": "object"},
    "None": {"type": "null"},
    "NoneType": {"type": "null"},
}


def _name(node):
    """'Optional' for Optional, typing.Optional and t.Optional; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return None


def _nullable(schema):
    if not schema:
        return {}
    types = schema.get("type")
    if types is None:
        return {"anyOf": [schema, {"type": "null"}]}
    types = types if isinstance(types, list) else [types]
    out = dict(schema)
    out["type"] = types + (["null"] if "null" not in types else [])
    return out


def _schema(node):
    """JSON Schema of an annotation; {} (anything) for what it cannot tell."""
    if node is None:
        return {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:  # a string annotation: "int", "list[str]"
            return _schema(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # int | None
        left, right = node.left, node.right
        if _name(right) == "None":
            return _nullable(_schema(left))
        if _name(left) == "None":
            return _nullable(_schema(right))
        parts = [_schema(left), _schema(right)]
        return {"anyOf": parts} if all(parts) else {}
    if isinstance(node, ast.Subscript):
        base = _name(node.value)
        args = node.slice
        if isinstance(args, ast.Index):  # Python < 3.9 wraps the slice
            args = args.value
        items = list(args.elts) if isinstance(args, ast.Tuple) else [args]
        if base == "Optional" and len(items) == 1:
            return _nullable(_schema(items[0]))
        if base == "Union":
            if any(_name(i) == "None" for i in items):
                rest = [i for i in items if _name(i) != "None"]
                if len(rest) == 1:
                    return _nullable(_schema(rest[0]))
            parts = [_schema(i) for i in items]
            return {"anyOf": parts} if all(parts) else {}
        outer = _SIMPLE.get(base or "")
        if outer is None:
            return {}
        out = dict(outer)
        if out.get("type") == "array" and base in ("list", "List", "set", "Set", "Sequence"):
            inner = _schema(items[0])
            if inner:
                out["items"] = inner
        return out
    name = _name(node)
    return dict(_SIMPLE[name]) if name in _SIMPLE else {}


def _default(node):
    """The default as JSON when it is a literal, else a marker that there is one."""
    try:
        value = ast.literal_eval(node)
        json.dumps(value)
        return True, value
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False, None


def _describe(func, module, path):
    a = func.args
    props, required = {}, []
    positional = list(getattr(a, "posonlyargs", [])) + list(a.args)
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    for i, (arg, default) in enumerate(params):
        if i == 0 and arg.arg in ("self", "cls"):
            continue
        schema = _schema(arg.annotation)
        if default is None:
            required.append(arg.arg)
        else:
            known, value = _default(default)
            if known:
                schema["default"] = value
        props[arg.arg] = schema
    input_schema = {"type": "object", "properties": props}
    if required:
        input_schema["required"] = required
    if a.kwarg is not None:
        input_schema["additionalProperties"] = True
    sig = func.name + "(" + ast.unparse(a) + ")" if hasattr(ast, "unparse") else func.name
    if func.returns is not None and hasattr(ast, "unparse"):
        sig += " -> " + ast.unparse(func.returns)
    return {
        "module": module,
        "function": func.name,
        "signature": sig,
        "docstring": ast.get_docstring(func) or "",
        "inputSchema": input_schema,
        "file": path,
        "line": func.lineno,
    }


def scan_file(path, module):
    """(tools, errors) of one file."""
    try:
        with open(path, "rb") as f:
            source = f.read()
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        msg = "%s: %s" % (type(e).__name__, e.msg)
        return [], [{"module": module, "file": path, "line": e.lineno or 0, "error": msg}]
    except (OSError, ValueError) as e:  # unreadable, or NUL bytes in the source
        return [], [{"module": module, "file": path, "line": 0, "error": str(e)}]
    tools = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("_") or not ast.get_docstring(node):
            continue
        tools.append(_describe(node, module, path))
    return tools, []


def _public(parts):
    return all(p and not p.startswith("_") for p in parts)


def scan_folder(root):
    """Every helper module under root: root/<name>.py and the .py files of root/<name>/."""
    tools, errors = [], []
    try:
        entries = sorted(os.listdir(root))
    except OSError as e:
        return [], [{"module": "", "file": root, "line": 0, "error": str(e)}]
    for entry in entries:
        path = os.path.join(root, entry)
        if entry.endswith(".py") and os.path.isfile(path):
            mod = entry[:-3]
            if _public([mod]):
                t, e = scan_file(path, mod)
                tools += t
                errors += e
        elif os.path.isdir(path) and entry.isidentifier():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d.isidentifier())
                rel = os.path.relpath(dirpath, root).split(os.sep)
                for fn in sorted(filenames):
                    if not fn.endswith(".py"):
                        continue
                    parts = rel + ([] if fn == "__init__.py" else [fn[:-3]])
                    if not _public(parts):
                        continue
                    t, e = scan_file(os.path.join(dirpath, fn), ".".join(parts))
                    tools += t
                    errors += e
    return tools, errors


def main(argv):
    roots = argv or [os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]]
    tools, errors = [], []
    for root in roots:
        t, e = scan_folder(root)
        tools += t
        errors += e
    json.dump({"tools": tools, "errors": errors}, sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
