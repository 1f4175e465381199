//! Agent Client Protocol: wire types for ACP v1 and the extensions the ski specs use.
