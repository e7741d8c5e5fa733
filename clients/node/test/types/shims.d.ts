// The Workflow SDK's runtime entry point, which the documentation's wiring imports: the client's
// tests do not install the SDK, only the world it hands out.
declare module 'workflow/runtime' {
  export function getWorld(): ReturnType<typeof import('@workflow/world-postgres').createWorld>;
}
