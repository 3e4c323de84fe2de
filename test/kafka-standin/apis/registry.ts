import { apiVersions } from './api-versions.ts';
import { fetch } from './fetch.ts';
import { findCoordinator, heartbeat, joinGroup, leaveGroup, syncGroup } from './groups.ts';
import { initProducerId } from './init-producer-id.ts';
import { listOffsets } from './list-offsets.ts';
import { metadata } from './metadata.ts';
import { offsetCommit, offsetFetch } from './offsets.ts';
import { produce } from './produce.ts';
import { createTopics, deleteTopics } from './topics.ts';
import type { ApiSpec } from './types.ts';

const implemented: readonly ApiSpec[] = [
  produce,
  fetch,
  listOffsets,
  metadata,
  offsetCommit,
  offsetFetch,
  findCoordinator,
  joinGroup,
  heartbeat,
  leaveGroup,
  syncGroup,
  createTopics,
  deleteTopics,
  initProducerId,
];

export const API_SPECS: readonly ApiSpec[] = [...implemented, apiVersions(implemented)].sort(
  (a, b) => a.key - b.key,
);

export const API_BY_KEY: ReadonlyMap<number, ApiSpec> = new Map(API_SPECS.map((s) => [s.key, s]));
