//! Per-user OAuth for MCP sources: the OAuth client ([`client`]) and the sealing of the
//! secrets it obtains before they reach the store ([`seal`]).

pub mod client;
pub mod seal;

pub use client::{
    BearerChallenge, ClientAuth, ClientCreds, Discovered, OAuthError, OAuthHttp, Tokens, authorize_url, parse_bearer_challenge, pkce, random_token,
};
pub use seal::{SealError, Sealer, row_aad};
