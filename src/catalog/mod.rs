//! Agent definitions: data, names, validation, and the compiled form cached per version.
pub mod definition;
pub use definition::*;
