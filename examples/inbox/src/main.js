// Mounts Novu's own <Inbox/> (the Solid UI of @novu/js, no React) against a Tidings server.
// Everything comes from the query string:
//   ?applicationIdentifier=…&subscriberId=…[&subscriberHash=…][&apiUrl=http://127.0.0.1:3000]
import { Novu } from '@novu/js';
import { NovuUI } from '@novu/js/ui';

const query = new URLSearchParams(window.location.search);
const apiUrl = (query.get('apiUrl') || 'http://127.0.0.1:3000').replace(/\/+$/, '');
const applicationIdentifier = query.get('applicationIdentifier') || '';
const subscriberId = query.get('subscriberId') || '';
const subscriberHash = query.get('subscriberHash') || undefined;

const status = document.getElementById('status');
const setStatus = (state, text) => {
  status.dataset.state = state;
  status.textContent = text;
};

document.getElementById('config').innerHTML =
  `apiUrl / socketUrl <code>${escapeHtml(apiUrl)}</code> · applicationIdentifier ` +
  `<code>${escapeHtml(applicationIdentifier || '(missing)')}</code> · subscriberId ` +
  `<code>${escapeHtml(subscriberId || '(missing)')}</code>` +
  (subscriberHash ? ' · subscriberHash set' : '');

if (!applicationIdentifier || !subscriberId) {
  // Without an applicationIdentifier the client would start Novu's "keyless" cloud mode.
  setStatus('error', 'Add ?applicationIdentifier=…&subscriberId=… to the URL (see README.md).');
} else {
  const options = {
    applicationIdentifier,
    subscriber: subscriberId,
    subscriberHash,
    apiUrl,
    // Always set socketUrl: the default dials Novu's cloud. A custom URL gets socket.io, which Tidings serves
    // on the same port as the API.
    socketUrl: apiUrl,
  };
  // One Novu client, shared with the UI, so that this page can show how the session went.
  const novu = new Novu(options);
  novu.on('session.initialize.resolved', ({ data, error }) => {
    if (error) {
      setStatus('error', `Session failed: ${error.message}${causeOf(error)}`);
    } else {
      setStatus('ready', `Session started: ${data.unreadCount?.total ?? data.totalUnreadCount ?? 0} unread.`);
    }
  });
  // Tidings does not implement delivery schedules yet (a schedule is refused with a 422), so the Schedule
  // section of the preferences is hidden: @novu/js 3.19.2 has no switch for it, but its container is the
  // `scheduleContainer` element of `appearance.elements`, which takes a style object.
  const appearance = { elements: { scheduleContainer: { display: 'none' } } };
  const ui = new NovuUI({ options, novu, appearance });
  ui.mountComponent({ name: 'Inbox', element: document.getElementById('inbox'), props: { placement: 'bottom-end' } });
}

function causeOf(error) {
  const original = error.originalError;
  return original?.message && original.message !== error.message ? ` (${original.message})` : '';
}

function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
