pub mod convert;
pub mod quota;
pub mod status;
pub mod services;
