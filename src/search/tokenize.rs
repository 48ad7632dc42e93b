//! TEMPORARY placeholder.
