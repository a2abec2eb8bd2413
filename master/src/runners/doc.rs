//! `doc.*`: the documentation of the master's runner and wheel functions, from their registries.

use brine_protocol::payload::{map, Value};

use super::{ready, Runner};

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "doc.runner",
        args: &[],
        doc: "Return the documentation of every runner function, keyed by name.\n\nCLI Example:\n\n    salt-run doc.runner\n",
        run: |_| ready(Ok(map(super::all().iter().map(|r| (r.name, Value::from(r.doc)))))),
    },
    Runner {
        name: "doc.wheel",
        args: &[],
        doc: "Return the documentation of every wheel function, keyed by name.\n\nCLI Example:\n\n    salt-run doc.wheel\n",
        run: |_| {
            ready(Ok(map(
                crate::wheel::all().iter().map(|w| (w.name, Value::from(w.doc))),
            )))
        },
    },
];
