"""One report, two renderings: Markdown (report.md) and self-contained HTML (report.html,
figures embedded). A report is a list of blocks:
  ("h1" | "h2" | "h3", text)   ("p", text)   ("list", [text, ...])
  ("table", header, rows)      ("img", png_path, caption)
  ("columns", left blocks, right blocks): one after the other in Markdown, side by side in
  HTML (the first screen: the claims figure beside what bears on it)
"""
import base64
import html
from pathlib import Path

STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:1em auto;line-height:1.4}"
         "h1{font-size:1.6em;margin:0.3em 0}"
         "table{border-collapse:collapse;font-size:12px;margin:0.5em 0}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
         "th{background:#f0f0f0}img{max-width:100%}code{background:#f4f4f4}"
         ".reproduced{color:#1a7f37}.notrep{color:#c62828}.not{color:#777}"
         ".warn{color:#b26a00}"
         ".columns{display:flex;gap:1em;align-items:flex-start}"
         ".columns>div{flex:1;min-width:0;max-height:58vh;overflow:auto}"
         ".columns img{max-height:45vh;object-fit:contain}.columns figure{margin:0}"
         ".columns ul,.columns p,.columns figcaption{font-size:12px;margin:0.3em 0}")


def markdown(blocks):
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "columns":
            out.append(markdown(block[1] + block[2]))
        elif kind in ("h1", "h2", "h3"):
            out += ["#" * int(kind[1]) + " " + block[1], ""]
        elif kind == "p":
            out += [block[1], ""]
        elif kind == "list":
            out += ["- " + item for item in block[1]] + [""]
        elif kind == "table":
            out += _md_table(block[1], block[2]) + [""]
        elif kind == "img":
            out += ["![%s](%s)" % (block[2], Path(block[1]).name), ""]
    return "\n".join(out)


def _md_table(header, rows):
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows]


def to_html(blocks, title):
    return "\n".join(["<!DOCTYPE html><html><head><meta charset='utf-8'><title>%s</title>"
                      "<style>%s</style></head><body>" % (html.escape(title), STYLE)]
                     + _html_blocks(blocks) + ["</body></html>"])


def _html_blocks(blocks):
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "columns":
            out.append("<div class='columns'>%s</div>" % "".join(
                "<div>%s</div>" % "\n".join(_html_blocks(side)) for side in block[1:]))
        elif kind in ("h1", "h2", "h3"):
            out.append("<%s>%s</%s>" % (kind, _inline(block[1]), kind))
        elif kind == "p":
            out.append("<p>%s</p>" % _inline(block[1]))
        elif kind == "list":
            out.append("<ul>%s</ul>" % "".join("<li>%s</li>" % _inline(i) for i in block[1]))
        elif kind == "table":
            out.append(_html_table(block[1], block[2]))
        elif kind == "img":
            data = base64.b64encode(Path(block[1]).read_bytes()).decode()
            out.append("<figure><img alt='%s' src='data:image/png;base64,%s'><figcaption>%s"
                       "</figcaption></figure>" % (html.escape(block[2]), data,
                                                   html.escape(block[2])))
    return out


def _inline(text):
    """Escape, then turn `code` spans into <code> and **bold** into <strong>."""
    parts = html.escape(str(text)).split("`")
    return "".join("<code>%s</code>" % p if i % 2 else _bold(p) for i, p in enumerate(parts))


def _bold(text):
    parts = text.split("**")
    if len(parts) % 2 == 0:  # an odd number of ** : not markup
        return text
    return "".join("<strong>%s</strong>" % p if i % 2 else p for i, p in enumerate(parts))


def _html_table(header, rows):
    head = "".join("<th>%s</th>" % _inline(h) for h in header)
    body = "".join("<tr>%s</tr>" % "".join(_td(v) for v in row) for row in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _td(value):
    text = str(value)
    word = text.split(", indicative")[0]  # a verdict keeps its colour when it is indicative
    css = {"reproduced": "reproduced", "not reproduced": "notrep", "not measured": "not",
           "not comparable": "not", "inconclusive": "warn", "WARNING": "warn"}.get(
        word.split(" (")[0], "warn" if text.startswith("partial (") else None)
    return "<td class='%s'>%s</td>" % (css, _inline(text)) if css else \
        "<td>%s</td>" % _inline(text)


# ---- numbers in text (the reports of a run, a comparison and an explanation) ----

def range_text(low, high, fmt="%.2f"):
    """"low - high", or "-" for none, or no spread to draw one from."""
    if low is None or high is None or low != low or high != high or low == high:
        return "-"
    return (fmt + " - " + fmt) % (low, high)


def number(value, fmt, scale=1):
    try:
        return fmt % (value * scale) if value == value and value is not None else "-"
    except TypeError:
        return "-"


def value_text(value):
    if value is None:
        return "-"
    return "%.2f" % value if isinstance(value, float) else str(value)
