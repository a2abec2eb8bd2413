//! The file server over real directories: lists, first match, ignores, chunks, gzip, the
//! cache, and every refusal.

use std::path::Path;

use brine_protocol::config::MasterConfig;

use super::FileServer;

fn server(extra: &str, tmp: &Path) -> FileServer {
    let conf = tmp.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let t = tmp.display();
    std::fs::write(
        conf.join("master"),
        format!(
            "root_dir: {t}\nfile_roots:\n  base: [{t}/a, {t}/b]\n  dev: [{t}/dev]\n  __env__: [{t}/envs/__env__]\n{extra}"
        ),
    )
    .unwrap();
    FileServer::new(&MasterConfig::load(&conf).unwrap())
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn tree(tmp: &Path) {
    write(&tmp.join("a/top.sls"), "base from a");
    write(&tmp.join("a/web/init.sls"), "web");
    write(&tmp.join("a/web/files/index.html"), "<h1>hi</h1>");
    write(&tmp.join("b/top.sls"), "base from b");
    write(&tmp.join("b/only-b.txt"), "b");
    std::fs::create_dir_all(tmp.join("b/empty")).unwrap();
    write(&tmp.join("dev/dev.sls"), "dev");
    write(&tmp.join("envs/qa/qa.sls"), "qa");
    write(&tmp.join("secret.txt"), "TOP SECRET");
}

#[test]
fn saltenvs_are_listed_merged_and_the_first_root_wins() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let fs = server("", tmp.path());
    assert_eq!(fs.envs(), ["__env__", "base", "dev"]);
    let base = fs.lists("base").unwrap();
    assert_eq!(
        base.files,
        [
            "only-b.txt",
            "top.sls",
            "web/files/index.html",
            "web/init.sls"
        ]
    );
    assert_eq!(base.dirs, ["empty", "web", "web/files"]);
    assert_eq!(base.empty_dirs, ["empty"]);
    let top = fs.find("top.sls", "base").unwrap();
    assert_eq!(std::fs::read_to_string(&top.real).unwrap(), "base from a");
    assert_eq!(top.rel, "top.sls");
    assert_eq!(top.path, format!("{}/a/top.sls", tmp.path().display()));
    assert!(fs.find("only-b.txt", "base").is_some());
    assert!(fs.find("dev.sls", "base").is_none());
    assert!(fs.find("dev.sls", "dev").is_some());
    assert!(fs.find("dev.sls?saltenv=dev", "base").is_some());
    assert!(fs.find("./web//init.sls", "base").is_some());
    // `__env__` stands for unknown saltenvs, by their name.
    assert_eq!(fs.lists("qa").unwrap().files, ["qa.sls"]);
    assert!(fs.find("qa.sls", "qa").is_some());
    assert!(fs.lists("nope").unwrap().files.is_empty());
    assert!(fs.lists("../..").is_none());
    assert!(fs.find("secret.txt", "..").is_none());
}

#[test]
fn a_server_without_env_placeholder_knows_only_its_saltenvs() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let conf = tmp.path().join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("master"),
        format!("file_roots:\n  base: [{}/a]\n", tmp.path().display()),
    )
    .unwrap();
    let fs = FileServer::new(&MasterConfig::load(&conf).unwrap());
    assert!(fs.lists("dev").is_none());
    assert!(fs.find("top.sls", "dev").is_none());
}

#[test]
fn ignored_files_are_neither_listed_nor_served() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    write(&tmp.path().join("a/.git/config"), "git");
    write(&tmp.path().join("a/notes.swp"), "swap");
    let fs = server(
        "file_ignore_regex: ['/\\.git($|/)', '^\\.git']\nfile_ignore_glob: ['*.swp']\n",
        tmp.path(),
    );
    let base = fs.lists("base").unwrap();
    assert!(!base
        .files
        .iter()
        .any(|f| f.contains(".git") || f.ends_with(".swp")));
    assert!(!base.dirs.iter().any(|d| d.contains(".git")));
    assert!(fs.find(".git/config", "base").is_none());
    assert!(fs.find("notes.swp", "base").is_none());
}

#[test]
fn paths_that_leave_the_roots_are_refused_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let secret = tmp.path().join("secret.txt");
    std::os::unix::fs::symlink(&secret, tmp.path().join("a/link-out")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), tmp.path().join("a/dir-out")).unwrap();
    std::os::unix::fs::symlink("web/init.sls", tmp.path().join("a/link-in")).unwrap();
    let fs = server("", tmp.path());
    let a = tmp.path().join("a");
    for bad in [
        "../secret.txt".to_string(),
        "../../etc/passwd".into(),
        "web/../../secret.txt".into(),
        "/etc/passwd".into(),
        secret.display().to_string(),
        "%2e%2e/secret.txt".into(),
        "..%2fsecret.txt".into(),
        "top.sls\0".into(),
        "link-out".into(),
        "dir-out/secret.txt".into(),
        "web".into(),
        "".into(),
        format!("top.sls?saltenv=../../{}", a.display()),
    ] {
        assert!(fs.find(&bad, "base").is_none(), "{bad:?} found");
        assert!(fs.serve(&bad, "base", 0, None).is_none(), "{bad:?} served");
    }
    let base = fs.lists("base").unwrap();
    assert!(!base.files.iter().any(|f| f.contains("-out")), "{base:?}");
    assert!(!base.dirs.iter().any(|f| f.contains("-out")), "{base:?}");
    assert_eq!(
        base.links.get("link-in").map(String::as_str),
        Some("web/init.sls")
    );
    assert_eq!(base.links.len(), 1);
    let inside = fs.serve("link-in", "base", 0, None).unwrap();
    assert_eq!(inside.data, b"web");
    assert_eq!(inside.dest, "link-in");
}

#[test]
fn files_are_served_in_buffer_sized_chunks_by_offset() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let body: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    write(&tmp.path().join("a/big.txt"), &body);
    let fs = server("file_buffer_size: 100\n", tmp.path());
    let mut got = Vec::new();
    loop {
        let chunk = fs.serve("big.txt", "base", got.len() as u64, None).unwrap();
        assert_eq!(chunk.dest, "big.txt");
        assert!(chunk.data.len() <= 100);
        if chunk.data.is_empty() {
            break;
        }
        got.extend(chunk.data);
    }
    assert_eq!(got, body.as_bytes());
    // gzip: each chunk is a gzip member of that chunk; an empty chunk is not compressed.
    let gz = fs.serve("big.txt", "base", 0, Some(1)).unwrap();
    assert_eq!(gz.gzip, Some(1));
    assert_eq!(&gz.data[..2], &[0x1f, 0x8b]);
    let n = gz.data.len();
    let isize = u32::from_le_bytes(gz.data[n - 4..].try_into().unwrap());
    let crc = u32::from_le_bytes(gz.data[n - 8..n - 4].try_into().unwrap());
    assert_eq!(isize, 100);
    assert_eq!(crc, super::gzip::crc32(&body.as_bytes()[..100]));
    let end = fs.serve("big.txt", "base", 1 << 40, Some(1)).unwrap();
    assert!(end.data.is_empty());
    assert_eq!(end.gzip, None);
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_one_gigabyte_file_is_served_without_reading_it_whole() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let big = tmp.path().join("a/huge.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: no disk used
    drop(f);
    let fs = server("", tmp.path());
    assert!(fs.lists("base").unwrap().files.contains(&"huge.bin".into()));
    let before = rss_kib();
    for loc in [0u64, 1 << 20, (1 << 29) + 7, (1 << 30) - 1000] {
        let chunk = fs.serve("huge.bin", "base", loc, None).unwrap();
        let want = (262_144u64).min((1 << 30) - loc) as usize;
        assert_eq!(chunk.data.len(), want);
        assert!(chunk.data.iter().all(|b| *b == 0));
    }
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "RSS grew by {grown} KiB");
    let found = fs.find("huge.bin", "base").unwrap();
    assert_eq!(found.stat[6], 1 << 30);
}

#[test]
fn lists_and_hashes_follow_changes_to_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let fs = server("hash_type: md5\n", tmp.path());
    assert!(!fs.lists("base").unwrap().files.contains(&"new.sls".into()));
    write(&tmp.path().join("a/web/new.sls"), "new");
    assert!(fs
        .lists("base")
        .unwrap()
        .files
        .contains(&"web/new.sls".into()));
    let found = fs.find("web/new.sls", "base").unwrap();
    assert_eq!(fs.hash_type(), "md5");
    assert_eq!(fs.hash(&found).unwrap(), md5_of("new"));
    write(&tmp.path().join("a/web/new.sls"), "newer");
    let found = fs.find("web/new.sls", "base").unwrap();
    assert_eq!(fs.hash(&found).unwrap(), md5_of("newer"));
    std::fs::remove_file(tmp.path().join("a/web/new.sls")).unwrap();
    assert!(!fs
        .lists("base")
        .unwrap()
        .files
        .contains(&"web/new.sls".into()));
    assert!(fs.find("web/new.sls", "base").is_none());
    assert_eq!(fs.clear(), 1);
}

fn md5_of(s: &str) -> String {
    brine_protocol::crypt::hash_hex(s.as_bytes(), brine_protocol::crypt::HashType::Md5)
}

#[test]
fn a_directory_linked_twice_is_listed_under_both_paths_and_a_loop_is_not_entered() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let a = tmp.path().join("a");
    std::os::unix::fs::symlink("web/files", a.join("site")).unwrap();
    std::os::unix::fs::symlink("..", a.join("web/up")).unwrap();
    let fs = server("", tmp.path());
    let base = fs.lists("base").unwrap();
    for f in ["web/files/index.html", "site/index.html"] {
        assert!(base.files.iter().any(|x| x == f), "{f} not in {base:?}");
    }
    for d in ["site", "web/files", "web/up"] {
        assert!(base.dirs.iter().any(|x| x == d), "{d} not in {base:?}");
    }
    // `web/up` leads back to the root: listed, not walked again.
    assert!(
        !base.files.iter().any(|f| f.starts_with("web/up/")),
        "{base:?}"
    );
    assert_eq!(
        base.links.get("site").map(String::as_str),
        Some("web/files")
    );
}
