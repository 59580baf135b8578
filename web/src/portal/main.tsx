// The customer portal's page (/portal/ and /portal/orders/{id}): a small bundle of its own, under
// the dashboard's strict CSP (no inline script or style). Dates are shown in the browser's locale.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { Portal } from './Portal.js';
import { OrderPage } from './OrderPage.js';
import './portal.css';

const order = /^\/portal\/orders\/([^/]+)\/?$/.exec(window.location.pathname);

createRoot(document.getElementById('root')!).render(
  <StrictMode>{order ? <OrderPage id={decodeURIComponent(order[1]!)} /> : <Portal />}</StrictMode>,
);
