//! daqtune's terminal text.
//!
//! The engine's commands return data (a [`daqtune_engine::model::plan::Plan`], a status, a
//! view) and report what they do as typed events ([`daqtune_engine::apply::Event`]); the
//! machine formats with a schema (JSON, JUnit, Prometheus, NFD, SVG) stay beside their data in
//! the engine. The words a person reads on a terminal are written here, once, for the binary
//! and for the tests that drive the engine as the binary does (issue 44: before, 175 `write!`
//! calls of terminal text were spread over the engine's commands).
//!
//! Renderers are pure: data in, text out. Which stream a line goes to is decided here too
//! ([`apply::Text`]), because it is part of how the CLI talks, not of what the engine decided.

pub mod apply;
pub mod diff;
pub mod gpu;
pub mod nic;
pub mod plan;
pub mod qualify;
pub mod report;
pub mod status;
pub mod topo;
