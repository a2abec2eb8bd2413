//! The file server's aes commands (`_file_*`, `_dir_list`, `_serve_file`, ...). Brine has no
//! file server yet: every environment is empty, as a master with empty `file_roots` answers.

use brine_protocol::loads::AesCmd;
use brine_protocol::payload::{map, Value};

/// The answer to a file server command; `None` for a command that is not one.
pub(crate) fn answer(cmd: &AesCmd) -> Option<Value> {
    Some(match cmd {
        AesCmd::FileEnvs => Value::Array(vec![Value::from("base")]),
        AesCmd::FileList | AesCmd::FileListEmptydirs | AesCmd::DirList => Value::Array(vec![]),
        AesCmd::SymlinkList
        | AesCmd::FileHash
        | AesCmd::FileFind
        | AesCmd::MasterTops
        | AesCmd::FileHashAndStat => Value::Map(vec![]),
        AesCmd::ServeFile => map(vec![("data", Value::from("")), ("dest", Value::from(""))]),
        _ => return None,
    })
}
