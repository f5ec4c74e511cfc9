#!/usr/bin/env python3
"""floodgate.yaml(5), the manual page of floodgate serve's configuration file, made from
docs/configuration.md at build time, so that the page and the reference cannot drift: every row of
its tables (the service file, each policy, each rule of a rule file) becomes an entry with its
type, range, default and notes; the prose around the tables is left to the installed markdown.

  packaging/man/make-config-man.py docs/configuration.md OUT VERSION

OUT ending in .gz is gzip'd (-9n, as Debian wants). SOURCE_DATE_EPOCH, when set, dates the page.
A table row this script cannot read (fewer cells than its header) is an error, not a silent skip.
"""
import datetime
import gzip
import os
import re
import sys

# Characters of the reference that roff spells with an escape (the rest of the non-ASCII: \[uXXXX]).
GLYPHS = {"–": r"\(en", "—": r"\(em", "µ": r"\(mc", "≥": r"\(>=", "≤": r"\(<=", "→": r"\(->",
          "←": r"\(<-", "×": r"\(mu", "±": r"\(+-", "≈": r"\(~~", "…": "...", "’": "'", "‘": "'",
          "“": r"\(lq", "”": r"\(rq", "≠": r"\(!="}
# The tables that become sections: the heading (or the sentence) before them → the section title.
TABLES = [("## The service file", "THE SERVICE FILE"), ("Each policy:", "EACH POLICY"),
          ("## Rule files (`rls.config`)", "RULE FILES")]


def escape(text):
    text = text.replace("\\", "\\e")
    out = []
    for ch in text:
        if ch in GLYPHS:
            out.append(GLYPHS[ch])
        elif ord(ch) > 127:
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    return "".join(out)


def inline(md):
    """Markdown of one cell or paragraph → roff: code bold, emphasis italic, links as their text."""
    md = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", md)  # [text](link) → text
    parts = re.split(r"(`[^`]*`)", md)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) >= 2:
            code = escape(part[1:-1]).replace("-", "\\-")
            code = re.sub(r"([&,/|])(?=\S)", r"\1\\:", code)  # long URLs and lists may break there
            out.append("\\fB" + code + "\\fR")
        else:
            part = escape(part)
            part = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", part)
            part = re.sub(r"(?<![\w*])\*([^*]+)\*(?![\w*])", r"\\fI\1\\fR", part)
            out.append(part)
    return "".join(out)


def line(text):
    """A text line that roff does not read as a request (a leading . or ')."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    # A | inside a code span ({header|query: …}) is not a column separator.
    out, cur, code = [], "", False
    for ch in row.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def table_after(lines, marker):
    start = next((i for i, l in enumerate(lines) if l.strip() == marker), None)
    if start is None:
        sys.exit(f"make-config-man.py: no {marker!r} in the reference")
    i = start + 1
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    header = cells(lines[i])
    rows = []
    i += 2  # the header and its |---| line
    while i < len(lines) and lines[i].startswith("|"):
        c = cells(lines[i])
        if len(c) != len(header):
            sys.exit(f"make-config-man.py: line {i + 1}: {len(c)} cells, the table has {len(header)}")
        rows.append(dict(zip(header, c)))
        i += 1
    if not rows:
        sys.exit(f"make-config-man.py: an empty table after {marker!r}")
    return rows


def entry(row):
    out = [".TP", line("\\fB" + inline(row["field"]).replace("\\fB", "").replace("\\fR", "") + "\\fR")]
    facts = []
    for name in ("type", "range", "default"):
        if row.get(name):
            facts.append(f"{name}: {inline(row[name])}")
    notes = row.get("unit / notes") or row.get("notes") or ""
    text = "; ".join(facts) + ("." if facts else "")
    if notes:
        text += (" " if text else "") + inline(notes[0].upper() + notes[1:]) + ("" if notes.endswith(".") else ".")
    out.append(line(text))
    return out


def page(reference, version, date):
    lines = open(reference, encoding="utf-8").read().splitlines()
    out = [
        f'.TH FLOODGATE.YAML 5 "{date}" "floodgate {escape(version)}" "File Formats"',
        ".\\\" Generated from docs/configuration.md by packaging/man/make-config-man.py: edit those.",
        ".nh",
        ".ad l",
        ".SH NAME",
        "floodgate.yaml \\- configuration file of floodgate serve",
        ".SH SYNOPSIS",
        ".B /etc/floodgate/floodgate.yaml",
        ".br",
        ".B floodgate serve \\-\\-config",
        ".I FILE",
        ".SH DESCRIPTION",
        "\\fBfloodgate\\-serve\\fR(1) reads one YAML document: the settings of the service and its",
        "policies (named rate limits that requests pick with \"policy\"). Unknown keys, a key repeated",
        "in one map, a second document, anchors and aliases are errors. Every error names",
        "\\fIfile\\fR:\\fIline\\fR:\\fIcolumn\\fR, the field and the accepted range.",
        "\\fBfloodgate serve \\-\\-check\\-config\\fR \\fIFILE\\fR runs the checks of a start without",
        "starting; SIGHUP (\\fBsystemctl reload floodgate\\fR) or a change of the file reloads it, and",
        "a file that fails its checks is refused while the running configuration keeps serving.",
        "Command-line options of \\fBfloodgate serve\\fR win over the file.",
        ".PP",
        "The entries below are the tables of the configuration reference, one per key, with its type,",
        "range, default and notes; the reference itself (its worked examples, calendar periods, TLS,",
        "and whose state a policy counts) is installed as",
        ".IR /usr/share/doc/floodgate/configuration.md.gz .",
    ]
    for marker, title in TABLES:
        out.append(f".SH {title}")
        for row in table_after(lines, marker):
            out.extend(entry(row))
    out += [
        ".SH EXAMPLE",
        ".nf",
        ".ft CR",
        "listen: 127.0.0.1:8080",
        "storage: redis://127.0.0.1:6379",
        "policies:",
        "  \\- name: api",
        "    strategy: gcra",
        "    limit: 10/second burst 20",
        "    key: {header: X\\-Api\\-Key}",
        "    fail: open",
        "  \\- name: llm\\-slots",
        "    strategy: concurrency",
        "    limit: 20 concurrent for 5 minutes",
        ".ft R",
        ".fi",
        ".SH FILES",
        ".TP",
        ".I /etc/floodgate/floodgate.yaml",
        "The configuration that the Debian package's systemd unit, \\fBfloodgate.service\\fR, starts with.",
        ".TP",
        ".I /usr/share/doc/floodgate/",
        "The README and the reference: configuration.md, http\\-api.md, algorithms.md, envoy.md,",
        "redis.md and the others, gzip'd.",
        ".SH SEE ALSO",
        "\\fBfloodgate\\fR(1), \\fBfloodgate\\-serve\\fR(1)",
    ]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    reference, target, version = sys.argv[1:]
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0") or 0) or None
    when = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc) if epoch else datetime.datetime.now(datetime.timezone.utc)
    text = page(reference, version, when.strftime("%B %Y")).encode("ascii")
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    if target.endswith(".gz"):
        with open(target, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            gz.write(text)
    else:
        open(target, "wb").write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
