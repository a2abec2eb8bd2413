//! The runner functions Brine's master runs, with their documentation, for the minion's
//! `sys.list_runner_functions` and `sys.runner_doc`. The master's runner registry
//! (`brine_master::runners`) is the source: a unit test there fails, printing the table to
//! paste here, whenever the two differ.

/// Every runner function Brine has, sorted by name, with its documentation.
pub const RUNNERS: &[(&str, &str)] = &[
    ("cache.grains", "Return the cached grains of the targeted minions ({} for a minion the cache has nothing of).\n\nCLI Example:\n\n    salt-run cache.grains '*'\n    salt-run cache.grains 'G@os:Debian' tgt_type=compound\n"),
    ("cache.pillar", "Return the cached pillar of the targeted minions: the pillar the master last compiled for each ({} for a minion the cache has nothing of).\n\nCLI Example:\n\n    salt-run cache.pillar '*'\n    salt-run cache.pillar web1,web2 tgt_type=list\n"),
    ("doc.runner", "Return the documentation of every runner function, keyed by name.\n\nCLI Example:\n\n    salt-run doc.runner\n"),
    ("doc.wheel", "Return the documentation of every wheel function, keyed by name.\n\nCLI Example:\n\n    salt-run doc.wheel\n"),
    ("fileserver.clear_cache", "Clear the file server cache of the VCS backends (gitfs, hgfs, svnfs). The roots backend has none to clear, so with roots alone this answers 'No cache was cleared' (Brine drops its cached file lists and hashes all the same; they are rebuilt on the next request).\n\nCLI Example:\n\n    salt-run fileserver.clear_cache\n"),
    ("fileserver.dir_list", "Return the directories of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.dir_list\n    salt-run fileserver.dir_list saltenv=prod\n"),
    ("fileserver.empty_dir_list", "Return the empty directories of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.empty_dir_list\n    salt-run fileserver.empty_dir_list saltenv=prod\n"),
    ("fileserver.envs", "Return the saltenvs of the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.envs\n"),
    ("fileserver.file_list", "Return the files of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.file_list\n    salt-run fileserver.file_list saltenv=prod\n"),
    ("fileserver.symlink_list", "Return the symlinks of a saltenv on the file server: {path: link target} (symlinks that leave the roots are left out).\n\nCLI Example:\n\n    salt-run fileserver.symlink_list\n    salt-run fileserver.symlink_list saltenv=prod\n"),
    ("fileserver.update", "Update the file server cache: the file lists and hashes are read again from file_roots on the next request. Returns True.\n\nCLI Example:\n\n    salt-run fileserver.update\n"),
    ("jobs.active", "Return the jobs running on the minions now (asks every minion for saltutil.running), with who runs each and who has returned.\n\nCLI Example:\n\n    salt-run jobs.active\n"),
    ("jobs.list_job", "Return one job from the job cache: what was run, on which minions, when, and every return.\n\nCLI Example:\n\n    salt-run jobs.list_job 20130916125524463507\n"),
    ("jobs.list_jobs", "Return the jobs in the job cache. search_function and search_target narrow the list: a glob, a list of globs or comma-separated globs, any of which may match.\n\nCLI Example:\n\n    salt-run jobs.list_jobs search_function='test.*,pkg.install'\n"),
    ("jobs.lookup_jid", "Return the returns of one job, keyed by minion; missing=True also names the minions that did not return.\n\nCLI Example:\n\n    salt-run jobs.lookup_jid 20130916125524463507\n"),
    ("jobs.print_job", "Return one job from the job cache, keyed by its jid.\n\nCLI Example:\n\n    salt-run jobs.print_job 20130916125524463507\n"),
    ("manage.alived", "Return the minions connected to the master now.\n\nCLI Example:\n\n    salt-run manage.alived\n"),
    ("manage.down", "Return the accepted minions that do not answer test.ping.\n\nCLI Example:\n\n    salt-run manage.down\n"),
    ("manage.present", "Return the minions connected to the master now.\n\nCLI Example:\n\n    salt-run manage.present\n"),
    ("manage.status", "Return the accepted minions that answer test.ping (up) and those that do not (down).\n\nCLI Example:\n\n    salt-run manage.status\n"),
    ("manage.up", "Return the minions that answer test.ping.\n\nCLI Example:\n\n    salt-run manage.up\n"),
    ("manage.versions", "Return the Salt version of every minion against the master's.\n\nCLI Example:\n\n    salt-run manage.versions\n"),
    ("pillar.show_pillar", "Compile the pillar of a minion now, with its cached grains (a minion the master has no grains of gets {'fqdn': minion}). Keyword arguments set grains; saltenv and pillarenv choose the environments.\n\nCLI Example:\n\n    salt-run pillar.show_pillar web1\n    salt-run pillar.show_pillar web1 pillarenv=dev\n    salt-run pillar.show_pillar new-minion os=Debian\n"),
    ("pillar.show_top", "Return the merged pillar top for a minion ({saltenv: {target: [match, sls...]}}), with its cached grains; render errors are printed as progress.\n\nCLI Example:\n\n    salt-run pillar.show_top web1\n"),
    ("state.orchestrate_show_sls", "Render an orchestration SLS (mods, comma-separated) of saltenv (default base) on the master and show its high data, as state.show_sls shows it: {<master id>: {ID: {state: [args..., function, {order: n}], __sls__, __env__}}}, or {<master id>: [errors]} when it does not compile.\n\nCLI Example:\n\n    salt-run state.orchestrate_show_sls orch.webservers\n"),
    ("test.arg", "Return the positional and keyword arguments given (keywords starting with __ left out).\n\nCLI Example:\n\n    salt-run test.arg foo bar=baz\n"),
    ("test.get_opts", "Return the master's configuration options (as wheel config.values gives them: Salt's defaults filled in, secrets left out).\n\nCLI Example:\n\n    salt-run test.get_opts\n"),
    ("test.metasyntactic", "Return the common metasyntactic words of a locality (us or uk).\n\nCLI Example:\n\n    salt-run test.metasyntactic locality=uk\n"),
    ("test.raw_arg", "Return the positional and keyword arguments given, all of them.\n\nCLI Example:\n\n    salt-run test.raw_arg foo bar=baz\n"),
    ("test.sleep", "Sleep s_time seconds (default 10), then return True.\n\nCLI Example:\n\n    salt-run test.sleep s_time=5\n"),
    ("test.stdout_print", "Print 'foo' and return 'bar' (the printed text reaches salt-run's terminal).\n\nCLI Example:\n\n    salt-run test.stdout_print\n"),
    ("test.stream", "Fire 99 progress events ('Runner is N% done'), one every 0.1 s, and return True.\n\nCLI Example:\n\n    salt-run test.stream\n"),
];
