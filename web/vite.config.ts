// Production build of the dashboard: served by the Keywarden server at /dashboard/
// (src/platform/http/static.ts). No source maps, no inline scripts or styles (the server's CSP
// allows only 'self'), hashed assets.
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  base: '/dashboard/',
  plugins: [react()],
  build: {
    target: 'es2022',
    sourcemap: false,
    // The module-preload polyfill would be the only inline-looking code; every browser we target has it.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0, // data: URLs for fonts/images would need a looser CSP for no gain
    reportCompressedSize: false,
    chunkSizeWarningLimit: 600,
    // Two pages: the dashboard, and the customer portal with a small bundle of its own (served at /portal/).
    rollupOptions: { input: { main: 'index.html', portal: 'portal.html' } },
  },
});
