"""Run every case of run_cases/ with Salt 3007's own state engine (HighState.render_highstate
then State.call_high, what state.sls runs) on this machine, and print JSON:
{case: {"ret": {tag: result}} | {"errors": [...]}}. Each case runs in WORK_DIR/<case>, which
its states see as the grain `work`, made by the case's setup.sh if any, removed afterwards;
"opts" in case.json sets minion options ("{work}" in a value stands for that directory,
"{proxy_port}" for the port of the test's HTTP proxy, BRINE_HTTP_PROXY_PORT);
with "runs": 2 the states are applied twice and the second run is printed; "like": "<case>"
takes the tree (base/) and setup.sh of that case; the grain `http` is the base URL of the
test's HTTP server (BRINE_HTTP in the environment). Usage: salt_run.py CASES_DIR WORK_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import salt.config
import salt.exceptions
import salt.state


def machine_allows(needs):
    """Cases that change users (root), users' crontabs (cron: root with a crontab program),
    install real packages (apt) or run real init scripts (sysv) run as root, the last two on a
    Debian-family machine, sysv only where systemd is not running."""
    if needs is None:
        return True
    root = os.geteuid() == 0
    if needs == "root":
        return root
    if needs == "cron":
        return root and shutil.which("crontab") is not None
    if needs == "apt":
        return root and shutil.which("apt-get") is not None
    if needs == "sysv":
        return (
            root
            and os.path.exists("/usr/sbin/service")
            and os.path.isdir("/etc/init.d")
            and not os.path.isdir("/run/systemd/system")
        )
    raise SystemExit(f"unknown need {needs!r}")


def case_opts(meta, work):
    """The case's own minion options ("opts" in case.json), "{work}" in a text value standing
    for the case's work directory and "{proxy_port}" for the port of the test's proxy."""
    return {
        key: (
            value.replace("{work}", work).replace(
                "{proxy_port}", os.environ.get("BRINE_HTTP_PROXY_PORT", "")
            )
            if isinstance(value, str)
            else value
        )
        for key, value in meta.get("opts", {}).items()
    }


def main():
    cases, work_root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    out = {}
    only = [c for c in os.environ.get("BRINE_RUN_CASES", "").split(",") if c]
    for case in sorted(os.listdir(cases)):
        if only and case not in only:
            continue
        meta = json.load(open(os.path.join(cases, case, "case.json")))
        if not machine_allows(meta.get("needs")):
            continue
        work = os.path.join(work_root, case)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        src = os.path.join(cases, meta.get("like", case))
        setup = os.path.join(src, "setup.sh")
        if os.path.exists(setup):
            subprocess.run(["sh", setup, work], check=True)
        root = tempfile.mkdtemp()
        opts = salt.config.minion_config(None)
        opts.update(
            file_client="local",
            root_dir=root,
            cachedir=os.path.join(root, "cache"),
            file_roots={"base": [os.path.join(src, "base")]},
            pillar_roots={"base": [os.path.join(root, "no-pillar")]},
            id="m1",
            grains={"id": "m1", "os_family": "Debian", "os": "Debian", "oscodename": "bookworm", "kernel": "Linux", "osarch": "amd64", "cpuarch": "x86_64", "shell": "/bin/sh", "work": work, "http": os.environ.get("BRINE_HTTP", "")},
            test=meta.get("test", False),
            failhard=meta.get("failhard", False),
        )
        opts.update(case_opts(meta, work))
        st = salt.state.HighState(opts)
        high, errors = st.render_highstate({"base": meta["mods"]})
        if errors:
            out[case] = {"errors": errors}
        else:
            try:
                for _ in range(meta.get("runs", 1)):
                    ret = st.state.call_high(high)
                    st.state.reset_run_num()
                out[case] = {"errors": ret} if isinstance(ret, list) else {"ret": ret}
            except salt.exceptions.SaltInvocationError as exc:
                # A state gave its function arguments it does not take: the run ends.
                out[case] = {"refused": str(exc)}
        st.destroy()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    json.dump(out, sys.stdout, default=str)


main()
