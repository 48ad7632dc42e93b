pub mod convert;
pub mod status;
pub mod services;
