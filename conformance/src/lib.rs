//! ski-conformance: the scenario catalog, the engine that runs it against a target, and reports.
