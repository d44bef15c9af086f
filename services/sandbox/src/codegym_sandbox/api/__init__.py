"""HTTP faces of the sandbox: SandboxFusion-compatible routes and the native /v1 API."""
