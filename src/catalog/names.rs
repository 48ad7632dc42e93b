//! Names of SPEC §3: groups, local tool names, canonical (registered) names.

/// Canonical name of a grouped tool: every `_` of the group becomes `_u`, then `__`, then the
/// unchanged local name (`my_tools`/`select` → `my_utools__select`).
pub fn canonical_name(group: &str, local: &str) -> String {
    let mut out = String::with_capacity(group.len() + local.len() + 4);
    for c in group.chars() {
        if c == '_' {
            out.push_str("_u");
        } else {
            out.push(c);
        }
    }
    out.push_str("__");
    out.push_str(local);
    out
}

/// Why a group name is not acceptable, if it is not.
pub fn group_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 32 {
        return Some("a group name has 1 to 32 characters");
    }
    if !name.as_bytes()[0].is_ascii_alphabetic() {
        return Some("a group name starts with an ASCII letter");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Some("a group name has only ASCII letters, digits, '-' and '_'");
    }
    if name.contains("__") {
        return Some("a group name must not contain '__'");
    }
    None
}

/// Why a tool name (local, direct or control) is not acceptable, if it is not.
pub fn tool_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 64 {
        return Some("a tool name has 1 to 64 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Some("a tool name has only ASCII letters, digits, '_' and '-'");
    }
    None
}

/// Why an agent id is not acceptable, if it is not.
pub fn agent_id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() || id.len() > 128 {
        return Some("an agent id has 1 to 128 characters");
    }
    if !id.as_bytes()[0].is_ascii_alphanumeric() {
        return Some("an agent id starts with an ASCII letter or digit");
    }
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return Some("an agent id has only ASCII letters, digits, '-', '_' and '.'");
    }
    None
}

/// Why a source id is not acceptable, if it is not.
pub fn source_id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() || id.len() > 128 {
        return Some("a source id has 1 to 128 characters");
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("a source id has only visible ASCII characters");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_name_escapes_group_underscores() {
        assert_eq!(canonical_name("my_tools", "select"), "my_utools__select");
        assert_eq!(canonical_name("a_", "b"), "a_u__b");
        assert_eq!(canonical_name("a", "_b"), "a___b");
        assert_eq!(canonical_name("a_u", "b"), "a_uu__b");
        assert_eq!(canonical_name("crm", "customer_name"), "crm__customer_name");
    }

    #[test]
    fn a_underscore_b_differs_from_a_b_underscore() {
        assert_ne!(canonical_name("a_", "b"), canonical_name("a", "_b"));
    }

    #[test]
    fn group_names_follow_spec_rules() {
        assert!(group_name_problem("crm").is_none());
        assert!(group_name_problem("my_tools-2").is_none());
        assert!(group_name_problem(&"a".repeat(32)).is_none());
        assert!(group_name_problem(&"a".repeat(33)).is_some());
        assert!(group_name_problem("").is_some());
        assert!(group_name_problem("1crm").is_some());
        assert!(group_name_problem("_crm").is_some());
        assert!(group_name_problem("a__b").is_some());
        assert!(group_name_problem("cr m").is_some());
        assert!(group_name_problem("crm.x").is_some());
    }

    #[test]
    fn tool_names_follow_spec_rules() {
        assert!(tool_name_problem("customer_name").is_none());
        assert!(tool_name_problem("_b").is_none());
        assert!(tool_name_problem("get-thing2").is_none());
        assert!(tool_name_problem(&"t".repeat(64)).is_none());
        assert!(tool_name_problem(&"t".repeat(65)).is_some());
        assert!(tool_name_problem("").is_some());
        assert!(tool_name_problem("a.b").is_some());
        assert!(tool_name_problem("a b").is_some());
    }
}
