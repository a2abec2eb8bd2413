"""Render every case of the corpus with Salt's own renderers and print the results as JSON.
A `NAME.sls` goes through the renderer pipeline as a state file does: {NAME: {"data": ...}}.
A `NAME.j2` is a template as `file.managed` renders it: {"NAME.j2": {"text": "..."}}.
A case that fails gives {"error": "..."}. Usage: salt_render.py CORPUS_DIR"""
import json
import os
import sys
import tempfile

import salt.config
import salt.loader
import salt.template
import salt.utils.templates


def main():
    corpus = os.path.abspath(sys.argv[1])
    ctx = json.load(open(os.path.join(corpus, "_context.json")))
    cache = tempfile.mkdtemp()
    opts = salt.config.minion_config(None)
    opts.update(
        file_client="local",
        file_roots={"base": [corpus]},
        cachedir=cache,
        grains=ctx["grains"],
        pillar=ctx["pillar"],
        id="minion1",
    )
    mods = salt.loader.minion_mods(opts)
    rend = salt.loader.render(opts, mods)
    out = {}
    for name in sorted(os.listdir(corpus)):
        if name.endswith(".j2"):
            out[name] = template(os.path.join(corpus, name), ctx, opts, mods)
            continue
        if not name.endswith(".sls"):
            continue
        sls = name[: -len(".sls")]
        try:
            data = salt.template.compile_template(
                os.path.join(corpus, name), rend, "jinja|yaml", opts["renderer_blacklist"],
                opts["renderer_whitelist"], saltenv="base", sls=sls,
            )
            if hasattr(data, "read"):
                data = data.read()
            out[sls] = {"data": json.loads(json.dumps(data, default=str))}
        except Exception as exc:  # the case's error, compared only as "failed"
            out[sls] = {"error": str(exc)}
    json.dump(out, sys.stdout)


def template(path, ctx, opts, mods):
    try:
        done = salt.utils.templates.JINJA(
            path, to_str=True, saltenv="base", grains=ctx["grains"], pillar=ctx["pillar"],
            opts=opts, salt=mods,
        )
    except Exception as exc:  # the case's error, compared only as "failed"
        return {"error": str(exc)}
    return {"text": done["data"]} if done["result"] else {"error": str(done["data"])}


main()
