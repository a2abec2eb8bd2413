//! Render failures, worded as Salt words them.

/// A render that failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The file asks for a renderer Brine does not run (`#!py`, `#!mako`…).
    #[error("Rendering SLS '{saltenv}:{sls}' failed: The renderer '{renderer}' is not available")]
    Unsupported {
        saltenv: String,
        sls: String,
        renderer: String,
    },
    /// A renderer failed on the file.
    #[error("Rendering SLS '{saltenv}:{sls}' failed: {cause}")]
    Failed {
        saltenv: String,
        sls: String,
        cause: String,
    },
}
