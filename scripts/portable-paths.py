#!/usr/bin/env python3
"""Rewrites the machine paths of committed files as a run folder writes them now
(src/store/paths.rs): relative to the run folder (a build log of the run) or the
repository, `~` for a home folder, `$TMPDIR` for the temporary folder.

    scripts/portable-paths.py REPO_ON_THAT_MACHINE HOME_ON_THAT_MACHINE [DIR...]

REPO_ON_THAT_MACHINE is where the repository was on the machine that wrote the files
(for the committed evidence: /work/main), HOME_ON_THAT_MACHINE its home folder (/root).
DIRs default to evidence/ and tests/fixtures/. Text files and gzipped ones (`*.gz`),
not Rust sources (a fixture's made-up paths), are rewritten in place, only where a path changes; a meta.json of a run folder gets its
`paths` (the repository relative to the folder) and, where its experiment copy changed,
its `experiment_sha256` again. tests/it/portable_paths.rs (the check) names what is left.
"""

import gzip
import hashlib
import json
import os
import re
import sys


def rules(repo, home):
    """(regex, replacement function) for the paths of that machine."""
    parent = os.path.dirname(repo)
    roots = [(repo, ""), (home, "~"), ("/tmp", "$TMPDIR")]
    if parent not in ("", "/"):
        roots.append((parent, ".."))  # a folder shared with the repository
    roots.append(("/home/[^/\\s\"'`]+", "~"))
    roots.append(("/Users/[^/\\s\"'`]+", "~"))
    alt = "|".join(r if r.startswith("/home/") or r.startswith("/Users/") else re.escape(r)
                   for r, _ in sorted(roots, key=lambda x: -len(x[0])))
    rx = re.compile(r"(?<![A-Za-z0-9._~$/-])(" + alt + r")(?=[/\s\"'`),:;\]}|]|$)(/?)")

    def sub(m):
        root, slash = m.group(1), m.group(2)
        if root == repo:
            return "" if slash else "."
        if root == parent:
            return "../" if slash else ".."
        if root in ("/tmp", home) and not slash:
            return root  # the folder itself names no machine's work ("under /tmp")
        if root == "/tmp":
            return "$TMPDIR" + slash
        return "~" + slash  # the home folder, any user's

    return lambda text: rx.sub(sub, text)


def run_relative(value, run_id):
    """A path into run folder `run_id` (its build log), relative to that folder."""
    marker = "/" + run_id + "/"
    if value.startswith("/") and marker in value:
        return value.split(marker, 1)[1]
    return None


def rewrite_meta(path, text, rewrite, top):
    meta = json.loads(text)
    folder = os.path.dirname(path)
    changes = {}
    run_id = meta.get("run_id", "")
    ext = meta.get("external") or {}
    for v in (ext.get("variants") or {}).values():
        log = (v.get("build") or {}).get("log")
        if isinstance(log, str) and run_id:
            r = run_relative(log, run_id)
            if r is not None:
                changes[log] = r

    def walk(x):
        if isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, str) and x not in changes:
            new = rewrite(x)
            if new != x:
                changes[x] = new

    walk(meta)
    out = text
    for old, new in changes.items():
        enc = lambda s: json.dumps(s, ensure_ascii=False)
        out = out.replace(enc(old), enc(new))
    copy = os.path.join(folder, "experiment.toml")
    if os.path.isfile(copy) and "experiment_sha256" in meta:
        sha = hashlib.sha256(open(copy, "rb").read()).hexdigest()
        out = out.replace('"experiment_sha256": "%s"' % meta["experiment_sha256"],
                          '"experiment_sha256": "%s"' % sha)
    if changes and "paths" not in meta:
        body = out.rstrip()
        body = body[:-1].rstrip() + ',\n  "paths": {\n    "repo": %s\n  }\n}' % json.dumps(
            os.path.relpath(top, folder))
        out = body + ("\n" if text.endswith("\n") else "")
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    repo, home = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/")
    dirs = sys.argv[3:] or ["evidence", "tests/fixtures"]
    top = os.getcwd()
    rewrite = rules(repo, home)
    changed = 0
    metas = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                p = os.path.join(root, f)
                if f.endswith(".rs"):
                    continue  # a fixture's source: its paths are made up, not a machine's
                if f == "meta.json":
                    metas.append(p)  # after the experiment copies
                    continue
                gz = f.endswith(".gz")
                raw = open(p, "rb").read()
                try:
                    text = (gzip.decompress(raw) if gz else raw).decode("utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                new = rewrite(text)
                if new != text:
                    data = new.encode("utf-8")
                    open(p, "wb").write(gzip.compress(data, mtime=0) if gz else data)
                    changed += 1
    for p in metas:
        text = open(p, encoding="utf-8").read()
        new = rewrite_meta(p, text, rewrite, top)
        if new != text:
            open(p, "w", encoding="utf-8").write(new)
            changed += 1
    print(f"{changed} files rewritten")


if __name__ == "__main__":
    main()
