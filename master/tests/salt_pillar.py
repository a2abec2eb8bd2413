"""Compile the pillar of every minion of every case in CASES_DIR with Salt's own pillar
compiler (salt.pillar.Pillar, as a Salt master runs it for `_pillar`) and print JSON:
{case: {minion: pillar}}. Each case directory has `master.conf` (a master config, `@DIR@`
standing for the case directory) and `minions.json` ({id: grains}).
Usage: salt_pillar.py CASES_DIR"""
import json
import os
import sys
import tempfile

import salt.config
import salt.pillar


def plain(value):
    """bytes (file_tree values) as text, as Brine's JSON view shows them."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def main():
    cases = os.path.abspath(sys.argv[1])
    out = {}
    for case in sorted(os.listdir(cases)):
        cdir = os.path.join(cases, case)
        if not os.path.isdir(cdir):
            continue
        root = tempfile.mkdtemp()
        os.makedirs(os.path.join(root, "conf"))
        conf = open(os.path.join(cdir, "master.conf")).read().replace("@DIR@", cdir)
        with open(os.path.join(root, "conf", "master"), "w") as f:
            f.write(f"root_dir: {root}\n{conf}")
        opts = salt.config.master_config(os.path.join(root, "conf", "master"))
        minions = json.load(open(os.path.join(cdir, "minions.json")))
        # The minions are accepted (nodegroups of file_tree are matched against the keys).
        accepted = os.path.join(opts["pki_dir"], "minions")
        os.makedirs(accepted, exist_ok=True)
        for mid in minions:
            open(os.path.join(accepted, mid), "w").close()
        out[case] = {}
        for mid, grains in minions.items():
            grains = dict(grains, id=mid)
            pillar = salt.pillar.Pillar(opts, grains, mid, None).compile_pillar()
            out[case][mid] = plain(pillar)
    json.dump(out, sys.stdout, default=str)


main()
