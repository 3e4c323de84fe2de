#!/usr/bin/env node
// The published entry point runs the compiled CLI (npm run build).
import '../dist/cli/main.js';
