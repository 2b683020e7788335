"""Render a ProcessImage the way glibc's `ldd` prints it.

Differences from ldd, on purpose: no ` (0x…)` load addresses (a static analysis maps nothing, and ldd's own addresses
change with every run under ASLR) and no `linux-vdso.so.1` line (the kernel's vDSO is no file). Everything else is
ldd's: one line per object in load order, `NAME => PATH`, `PATH` alone when the name was the path, the interpreter
where glibc's rtld.c puts it, `NAME => not found` for each failed request (a name missing twice is listed twice, as
ldd does). Where ldd would stop with "error while loading shared libraries", the line reads `NAME => error: REASON`
and the rest is still listed.
"""

from __future__ import annotations

from verify.ld import image as m


def ldd_lines(image: m.ProcessImage) -> list[str]:
    lines: list[str] = []
    line_of: dict[str, int] = {}
    objects = {o.path: o for o in image.objects}
    for request in image.requests:
        # Most requests are answered by an object already loaded, and ldd prints nothing for them: test that first.
        if request.outcome == m.ALREADY_LOADED or request.kind != "needed":
            continue
        if request.outcome == m.LOADED:
            obj = objects[request.path]
            lines.append(_object_line(obj))
            line_of[obj.path] = len(lines)
        elif request.outcome == m.NOT_FOUND:
            lines.append(f"\t{request.name} => not found")
        elif request.outcome == m.ERROR:
            lines.append(f"\t{request.name} => error: {request.error}")
    # Found by position, not with objects.index(): that compares LoadedObjects field by field, all the way along.
    position = next((i for i, o in enumerate(image.objects) if o.how == m.INTERPRETER), None)
    if position is not None:
        before = image.objects[position - 1]
        at = 0 if before.how == m.MAIN_PROGRAM else line_of.get(before.path, len(lines))
        lines.insert(at, _object_line(image.objects[position]))
    return lines


def _object_line(obj: m.LoadedObject) -> str:
    if obj.requested_as == obj.path:
        return f"\t{obj.path}"
    return f"\t{obj.requested_as} => {obj.path}"


def parse_ldd_output(text: str) -> list[str]:
    """Real ldd output normalised to ldd_lines' form (addresses and the vDSO line dropped), for comparisons."""
    result = []
    for line in text.splitlines():
        if not line.startswith("\t"):
            continue
        body = line.strip()
        if body.startswith("linux-vdso.so") or body.startswith("statically linked"):
            continue
        if body.endswith(")") and " (0x" in body:
            body = body[: body.rindex(" (0x")]
        result.append("\t" + body)
    return result
