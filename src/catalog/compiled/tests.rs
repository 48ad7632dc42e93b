//! Compiling a catalog: the order and lookup of its tools.

use super::*;

/// `tools` tools in three groups, declared in an order unlike their canonical names' (some
/// names prefixes of others, upper and lower case), plus a direct source.
fn definition(tools: usize) -> AgentDefinition {
    let mut def = AgentDefinition::default();
    for (g, group) in ["zeta", "alpha", "Mid"].iter().enumerate() {
        let id = format!("src-{group}");
        def.groups.insert(group.to_string(), ToolGroup { description: String::new(), source_ids: vec![id.clone()] });
        let decls = (0..tools / 3)
            .map(|i| ToolDeclaration { name: format!("{}_{}", ["get", "Get", "get_x"][(i + g) % 3], (i * 7919) % tools), ..Default::default() })
            .collect();
        def.sources.push(ToolSource { id, kind: SourceKind::Client(ClientSource { tools: decls }), ..Default::default() });
    }
    let direct = vec![ToolDeclaration { name: "direct_one".into(), ..Default::default() }];
    def.sources.push(ToolSource { id: "direct".into(), kind: SourceKind::Client(ClientSource { tools: direct }), ..Default::default() });
    def
}

#[test]
fn grouped_tools_are_ordered_by_canonical_name_and_found_by_it() {
    // Below and above the size from which the index builds its name tables on a thread.
    for tools in [30, 3 * 4096] {
        let catalog = Catalog::compile(&definition(tools), &Default::default());
        assert_eq!(catalog.grouped.len(), tools, "every grouped tool kept: {:?}", catalog.diagnostics.first());
        let names: Vec<&str> = catalog.grouped_by_name.iter().map(|&t| catalog.tool(t).name.as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "canonical byte order");
        for &t in &catalog.grouped {
            assert_eq!(catalog.by_canonical(&catalog.tool(t).name), Some(t));
        }
        for group in &catalog.groups {
            let members: Vec<&str> = group.tools.iter().map(|&t| catalog.tool(t).name.as_str()).collect();
            assert_eq!(members.len(), tools / 3);
            assert!(members.iter().all(|n| n.starts_with(&format!("{}__", group.name))) && members.is_sorted());
        }
        assert_eq!(catalog.direct_tool("direct_one").map(|t| catalog.tool(t).name.as_str()), Some("direct_one"));
    }
}
