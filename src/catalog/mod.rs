//! Agent definitions: data, names, validation, and the compiled form cached per version.
pub mod adapt;
pub mod compiled;
pub mod definition;
pub mod names;
pub mod schema;
pub mod validate;

pub use compiled::{Catalog, GroupInfo, PreparedSource, PreparedTool};
pub use definition::*;
