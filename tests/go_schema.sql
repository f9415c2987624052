-- A store as the Go program (snapshot release, v0.1.14+) leaves it: contract §2.4 snapshot schema.
-- No stored_at column and no trigger, an edges CHECK without 'supersedes', the single-column read
-- indexes, float32 little-endian embedding blobs and PRAGMA user_version = 1. tests/test_store.py
-- builds the database from this text (no binary fixture) and checks that it opens, migrates
-- and is queried read-only with its bytes unchanged.
--
-- Embedding blobs are struct.pack('<4f', ...):
--   aaaaaaaa-…-0001: (1.0, 0.5, -0.25, 2.0) = X'0000803F0000003F000080BE00000040'
--   aaaaaaaa-…-0002: (0.0, 1.0, 0.0, 0.0)   = X'000000000000803F0000000000000000'

CREATE TABLE insights (
    id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    category TEXT DEFAULT 'general',
    importance INTEGER DEFAULT 3,
    tags TEXT DEFAULT '[]',
    entities TEXT DEFAULT '[]',
    source TEXT DEFAULT 'user',
    access_count INTEGER DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
, last_accessed_at TEXT, embedding BLOB, effective_importance REAL DEFAULT 0.5);

CREATE TABLE edges (
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    edge_type TEXT NOT NULL CHECK (edge_type IN ('temporal', 'semantic', 'causal', 'entity')),
    weight REAL DEFAULT 1.0,
    metadata TEXT DEFAULT '{}',
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, edge_type),
    FOREIGN KEY (source_id) REFERENCES insights(id) ON DELETE CASCADE,
    FOREIGN KEY (target_id) REFERENCES insights(id) ON DELETE CASCADE
);

CREATE TABLE oplog (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    operation TEXT NOT NULL,
    insight_id TEXT,
    detail TEXT DEFAULT '',
    created_at TEXT NOT NULL
);

CREATE INDEX idx_insights_category ON insights(category);
CREATE INDEX idx_insights_importance ON insights(importance);
CREATE INDEX idx_insights_created ON insights(created_at);
CREATE INDEX idx_insights_deleted ON insights(deleted_at);
CREATE INDEX idx_insights_source ON insights(source);
CREATE INDEX idx_insights_ei ON insights(effective_importance);
CREATE INDEX idx_insights_prune ON insights(deleted_at, importance, access_count, effective_importance);
CREATE INDEX idx_edges_source ON edges(source_id);
CREATE INDEX idx_edges_target ON edges(target_id);
CREATE INDEX idx_edges_type ON edges(edge_type);
CREATE INDEX idx_edges_source_type ON edges(source_id, edge_type);
CREATE INDEX idx_edges_target_type ON edges(target_id, edge_type);
CREATE INDEX idx_oplog_created ON oplog(created_at);

INSERT INTO insights (id, content, category, importance, tags, entities, source, access_count,
                      created_at, updated_at, deleted_at, last_accessed_at, embedding, effective_importance)
VALUES
('aaaaaaaa-0000-4000-8000-000000000001', 'Chose Qdrant because Rust performance is critical', 'decision', 4,
 '["db"]', '["Qdrant","Rust"]', 'user', 2, '2026-01-10T09:00:00Z', '2026-01-10T09:00:00Z', NULL,
 '2026-01-12T08:00:00Z', X'0000803F0000003F000080BE00000040', 0.8),
('aaaaaaaa-0000-4000-8000-000000000002', 'Rust performance is critical for the vector search engine', 'fact', 3,
 '[]', '["Rust"]', 'user', 0, '2026-01-11T09:00:00Z', '2026-01-11T09:00:00Z', NULL,
 NULL, X'000000000000803F0000000000000000', 0.5),
('aaaaaaaa-0000-4000-8000-000000000003', 'An old story the user told about the team', 'narrative', 2,
 '[]', '[]', 'user', 0, '2026-01-09T09:00:00Z', '2026-01-09T09:00:00Z', NULL, NULL, NULL, 0.3),
('aaaaaaaa-0000-4000-8000-000000000004', 'A forgotten memory', 'general', 3,
 '[]', '[]', 'user', 0, '2026-01-08T09:00:00Z', '2026-01-09T10:00:00Z', '2026-01-09T10:00:00Z', NULL, NULL, 0.5);

INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) VALUES
('aaaaaaaa-0000-4000-8000-000000000001', 'aaaaaaaa-0000-4000-8000-000000000002', 'temporal', 1.0,
 '{"direction":"precedes","sub_type":"backbone"}', '2026-01-11T09:00:00Z'),
('aaaaaaaa-0000-4000-8000-000000000002', 'aaaaaaaa-0000-4000-8000-000000000001', 'temporal', 1.0,
 '{"direction":"succeeds","sub_type":"backbone"}', '2026-01-11T09:00:00Z'),
('aaaaaaaa-0000-4000-8000-000000000002', 'aaaaaaaa-0000-4000-8000-000000000001', 'causal', 0.5,
 '{"overlap":"0.5000","sub_type":"causes"}', '2026-01-11T09:00:00Z');

INSERT INTO oplog (operation, insight_id, detail, created_at) VALUES
('remember', 'aaaaaaaa-0000-4000-8000-000000000001', 'Chose Qdrant because Rust performance is critical',
 '2026-01-10T09:00:00Z'),
('remember', 'aaaaaaaa-0000-4000-8000-000000000002', 'Rust performance is critical for the vector search engine',
 '2026-01-11T09:00:00Z');

PRAGMA user_version = 1;
