#!/usr/bin/env python3
"""The public API of a crate, one item a line, from rustdoc's JSON output.

usage: public_api.py CRATE.json

Every item reachable from the crate root through public modules and re-exports is listed
with its path as users write it: modules, structs (public fields), enums (variants),
traits (items), functions and methods with their signatures, constants, statics, type
aliases, macros, and the traits each public type implements (auto traits and blanket
impls are left out: they follow from the rest). Items of other crates re-exported here are
listed as `pub use` lines. `#[doc(hidden)]` items are listed too, marked, so that a hidden
item cannot slip in unnoticed either. Sorted, so that a diff shows what changed.

scripts/public_api.sh builds the JSON (a pinned nightly's rustdoc) and compares the listing
with the one checked in under api/.
"""

import json
import sys


def render_type(t, d):
    """A rustdoc JSON `Type` as Rust source (approximately: enough to tell signatures apart)."""
    if t is None:
        return "()"
    (kind, v), = t.items()
    if kind == "resolved_path":
        return v["path"] + render_args(v.get("args"), d)
    if kind == "generic":
        return v
    if kind == "primitive":
        return v
    if kind == "borrowed_ref":
        lt = (v["lifetime"] + " ") if v.get("lifetime") else ""
        mut = "mut " if v["is_mutable"] else ""
        return "&" + lt + mut + render_type(v["type"], d)
    if kind == "raw_pointer":
        return ("*mut " if v["is_mutable"] else "*const ") + render_type(v["type"], d)
    if kind == "slice":
        return "[" + render_type(v, d) + "]"
    if kind == "array":
        return "[" + render_type(v["type"], d) + "; " + str(v["len"]) + "]"
    if kind == "tuple":
        return "(" + ", ".join(render_type(x, d) for x in v) + ")"
    if kind == "impl_trait":
        return "impl " + " + ".join(render_bound(b, d) for b in v)
    if kind == "dyn_trait":
        parts = [render_poly(p, d) for p in v["traits"]]
        if v.get("lifetime"):
            parts.append(v["lifetime"])
        return "dyn " + " + ".join(parts)
    if kind == "qualified_path":
        trait = v.get("trait")
        self_ty = render_type(v["self_type"], d)
        if trait:
            return "<" + self_ty + " as " + trait["path"] + ">::" + v["name"]
        return self_ty + "::" + v["name"]
    if kind == "function_pointer":
        sig = v["sig"]
        ins = ", ".join(render_type(x[1], d) for x in sig["inputs"])
        out = sig.get("output")
        return "fn(" + ins + ")" + ((" -> " + render_type(out, d)) if out else "")
    if kind == "infer":
        return "_"
    if kind == "pat":
        return render_type(v["type"], d)
    return kind


def render_args(args, d):
    if not args:
        return ""
    if "angle_bracketed" in args:
        a = args["angle_bracketed"]
        parts = []
        for x in a["args"]:
            if "type" in x:
                parts.append(render_type(x["type"], d))
            elif "lifetime" in x:
                parts.append(x["lifetime"])
            elif "const" in x:
                parts.append(str(x["const"].get("expr", "_")))
            else:
                parts.append("_")
        for c in a.get("constraints", []):
            binding = c.get("binding", {})
            if "equality" in binding:
                eq = binding["equality"]
                val = render_type(eq["type"], d) if "type" in eq else "_"
                parts.append(c["name"] + " = " + val)
            elif "constraint" in binding:
                parts.append(c["name"] + ": " + " + ".join(render_bound(b, d) for b in binding["constraint"]))
        return "<" + ", ".join(parts) + ">" if parts else ""
    if "parenthesized" in args:
        p = args["parenthesized"]
        out = p.get("output")
        return "(" + ", ".join(render_type(x, d) for x in p["inputs"]) + ")" + (
            (" -> " + render_type(out, d)) if out else "")
    return ""


def render_poly(p, d):
    return p["trait"]["path"] + render_args(p["trait"].get("args"), d)


def render_bound(b, d):
    if "trait_bound" in b:
        tb = b["trait_bound"]
        modifier = "?" if tb.get("modifier") == "maybe" else ""
        return modifier + tb["trait"]["path"] + render_args(tb["trait"].get("args"), d)
    if "outlives" in b:
        return b["outlives"]
    return "_"


def render_generics(g, d):
    params = []
    for p in g.get("params", []):
        kind = p["kind"]
        if "lifetime" in kind:
            params.append(p["name"])
        elif "type" in kind:
            if kind["type"].get("is_synthetic"):
                continue
            bounds = kind["type"].get("bounds", [])
            params.append(p["name"] + (": " + " + ".join(render_bound(b, d) for b in bounds) if bounds else ""))
        elif "const" in kind:
            params.append("const " + p["name"] + ": " + render_type(kind["const"]["type"], d))
    return "<" + ", ".join(params) + ">" if params else ""


def render_fn(name, f, d):
    sig = f["sig"]
    header = f.get("header", {})
    quals = ""
    if header.get("is_const"):
        quals += "const "
    if header.get("is_async"):
        quals += "async "
    if header.get("is_unsafe"):
        quals += "unsafe "
    ins = []
    for pname, ty in sig["inputs"]:
        if pname == "self":
            rendered = render_type(ty, d)
            ins.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(rendered, "self: " + rendered))
        else:
            ins.append(pname + ": " + render_type(ty, d))
    out = sig.get("output")
    return quals + "fn " + name + render_generics(f.get("generics", {}), d) + "(" + ", ".join(ins) + ")" + (
        (" -> " + render_type(out, d)) if out else "")


def hidden(item):
    for a in item.get("attrs") or []:
        text = a.get("other", "") if isinstance(a, dict) else str(a)
        if "doc(hidden)" in text.replace(" ", ""):
            return True
    return False


def main():
    d = json.load(open(sys.argv[1]))
    index = d["index"]
    paths = d.get("paths", {})
    lines = set()
    crate = index[str(d["root"])]["name"]

    def item(i):
        return index.get(str(i))

    def external_path(i):
        p = paths.get(str(i))
        return "::".join(p["path"]) if p else None

    def emit(line, hide):
        lines.add(("#[doc(hidden)] " if hide else "") + line)

    seen_types = set()

    def visit_impls(it, path, hide):
        kind, v = next(iter(it["inner"].items()))
        for impl_id in v.get("impls", []):
            imp = item(impl_id)
            if imp is None:
                continue
            im = imp["inner"]["impl"]
            if im.get("is_synthetic") or im.get("blanket_impl") is not None:
                continue
            # The compiler's own marker traits of derives: not API, and they vary by toolchain.
            if (im.get("trait") or {}).get("path") in ("StructuralPartialEq", "TrivialClone"):
                continue
            trait = im.get("trait")
            if trait is not None:
                neg = "!" if im.get("is_negative") else ""
                # A kevents trait by its full path: the two event APIs' traits share a name
                # (core_v1::EventSink, events_v1::EventSink), and their impls must not merge.
                tp = paths.get(str(trait.get("id")), {}).get("path") or []
                tname = "::".join(tp) if tp and tp[0].startswith("kevents") else trait["path"]
                emit("impl " + neg + tname + render_args(trait.get("args"), d) + " for " + path, hide)
                continue
            for member_id in im["items"]:
                m = item(member_id)
                if m is None or m["visibility"] != "public":
                    continue
                visit_member(m, path, hide or hidden(m))

    def visit_member(m, owner, hide):
        kind, v = next(iter(m["inner"].items()))
        name = m["name"]
        if kind == "function":
            emit("pub " + render_fn(owner + "::" + name, v, d), hide)
        elif kind == "assoc_const" or kind == "constant":
            ty = v.get("type")
            emit("pub const " + owner + "::" + name + ": " + render_type(ty, d), hide)
        elif kind == "assoc_type":
            emit("pub type " + owner + "::" + name, hide)

    def visit(i, path, hide, depth=0):
        it = item(i)
        if it is None or depth > 32:
            return
        hide = hide or hidden(it)
        kind, v = next(iter(it["inner"].items()))
        if kind == "module":
            emit("pub mod " + path, hide)
            for c in v["items"]:
                child = item(c)
                if child is None or child["visibility"] != "public":
                    continue
                ck, cv = next(iter(child["inner"].items()))
                if ck == "use":
                    visit_use(child, cv, path, hide or hidden(child), depth)
                elif child.get("name"):
                    visit(c, path + "::" + child["name"], hide, depth + 1)
            return
        if kind == "struct":
            key = (i, path)
            if key in seen_types:
                return
            seen_types.add(key)
            emit("pub struct " + path + render_generics(v.get("generics", {}), d), hide)
            sk = v["kind"]
            fields = []
            if "plain" in sk:
                fields = sk["plain"]["fields"]
                if sk["plain"].get("has_stripped_fields"):
                    emit("pub struct " + path + " has private fields", hide)
            elif "tuple" in sk:
                fields = [f for f in sk["tuple"] if f is not None]
            for f in fields:
                fi = item(f)
                if fi is None or fi["visibility"] != "public":
                    continue
                emit("pub " + path + "::" + fi["name"] + ": " + render_type(fi["inner"]["struct_field"], d),
                     hide or hidden(fi))
            visit_impls(it, path, hide)
        elif kind == "enum":
            key = (i, path)
            if key in seen_types:
                return
            seen_types.add(key)
            emit("pub enum " + path + render_generics(v.get("generics", {}), d), hide)
            for var in v["variants"]:
                vi = item(var)
                if vi is None:
                    continue
                vk = vi["inner"]["variant"]["kind"]
                shape = ""
                if isinstance(vk, dict) and "tuple" in vk:
                    shape = "(" + ", ".join(
                        render_type(item(f)["inner"]["struct_field"], d) if f is not None and item(f) else "_"
                        for f in vk["tuple"]) + ")"
                elif isinstance(vk, dict) and "struct" in vk:
                    shape = " { " + ", ".join(
                        item(f)["name"] + ": " + render_type(item(f)["inner"]["struct_field"], d)
                        for f in vk["struct"]["fields"] if item(f)) + " }"
                emit("pub " + path + "::" + vi["name"] + shape, hide or hidden(vi))
            visit_impls(it, path, hide)
        elif kind == "trait":
            emit("pub trait " + path + render_generics(v.get("generics", {}), d), hide)
            for m in v["items"]:
                mi = item(m)
                if mi is not None:
                    visit_member(mi, path, hide or hidden(mi))
        elif kind == "function":
            emit("pub " + render_fn(path, v, d), hide)
        elif kind == "constant":
            emit("pub const " + path + ": " + render_type(v.get("type"), d), hide)
        elif kind == "static":
            emit("pub static " + path + ": " + render_type(v.get("type"), d), hide)
        elif kind == "type_alias":
            emit("pub type " + path + " = " + render_type(v.get("type"), d), hide)
            # A local type's impls are listed with the type itself.
        elif kind == "macro" or kind == "proc_macro":
            emit("macro " + path.split("::")[0] + "::" + it["name"] + "!", hide)
        elif kind == "union":
            emit("pub union " + path, hide)

    def visit_use(child, cv, path, hide, depth):
        target = cv.get("id")
        if cv.get("is_glob"):
            t = item(target) if target is not None else None
            if t is not None and "module" in t["inner"]:
                for c in t["inner"]["module"]["items"]:
                    cc = item(c)
                    if cc is None or cc["visibility"] != "public":
                        continue
                    ck, ccv = next(iter(cc["inner"].items()))
                    if ck == "use":
                        visit_use(cc, ccv, path, hide or hidden(cc), depth)
                    elif cc.get("name"):
                        visit(c, path + "::" + cc["name"], hide, depth + 1)
            else:
                emit("pub use " + cv["source"] + "::* in " + path, hide)
            return
        t = item(target) if target is not None else None
        if t is not None and t.get("crate_id") == 0:
            visit(target, path + "::" + cv["name"], hide, depth + 1)
        else:
            src = external_path(target) if target is not None else None
            # Named by the other crate and the item's own name: where the item sits inside
            # that crate (a private module) is not this crate's API.
            src = (src or cv["source"]).split("::")
            shown = src[0] if len(src) == 1 else src[0] + "::" + src[-1]
            emit("pub use " + path + "::" + cv["name"] + " = " + shown, hide)

    visit(d["root"], crate, False)
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
