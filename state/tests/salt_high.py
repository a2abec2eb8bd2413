"""Compile every case of cases.json with Salt's own state compiler (HighState.render_highstate
then State.verify_high, what state.show_sls runs) over tree/ and print JSON:
[{"high": ..., "errors": [...]}] in the cases' order. Usage: salt_high.py TESTS_DIR"""
import json
import os
import sys
import tempfile

import salt.config
import salt.state


def main():
    tests = os.path.abspath(sys.argv[1])
    tree = os.path.join(tests, "tree")
    cases = json.load(open(os.path.join(tests, "cases.json")))
    root = tempfile.mkdtemp()
    opts = salt.config.minion_config(None)
    opts.update(
        file_client="local",
        root_dir=root,
        cachedir=os.path.join(root, "cache"),
        file_roots={"base": [os.path.join(tree, "base")], "dev": [os.path.join(tree, "dev")]},
        id="m1",
        grains={"id": "m1", "os_family": "Debian"},
        pillar={},
    )
    out = []
    for case in cases:
        st = salt.state.HighState(opts)
        matches = {env: mods for env, mods in case["matches"]}
        high, errors = st.render_highstate(matches)
        errors += st.state.verify_high(high)
        out.append({"high": high, "errors": errors})
        st.destroy()
    json.dump(out, sys.stdout, default=str)


main()
