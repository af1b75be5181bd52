// The one script of the server's pages, served as a static file so the content security policy
// needs no inline script: it runs the WebAuthn ceremony for a form marked `data-passkey` ("get"
// to sign in or confirm with a passkey, "create" to register one). It asks the server for the
// options by posting the form's own fields with `step` set to the form's `data-passkey-options`,
// hands them to the browser, puts the browser's answer (JSON) in the form's `passkey_response`
// field and submits the form. Such forms start hidden: without script (or without WebAuthn) they
// never show, and the page says what else works.
export const PASSKEY_SCRIPT_PATH = '/web/passkey.js'

export const PASSKEY_SCRIPT = `'use strict';
(function () {
  if (!window.PublicKeyCredential || !navigator.credentials) return;
  function fromB64u(s) {
    var b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
    var out = new Uint8Array(b.length);
    for (var i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
    return out.buffer;
  }
  function toB64u(buf) {
    if (!buf) return undefined;
    var bytes = new Uint8Array(buf), s = '';
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
  }
  function creds(list) {
    return (list || []).map(function (c) { return Object.assign({}, c, { id: fromB64u(c.id) }); });
  }
  function requestOptions(o) {
    return Object.assign({}, o, { challenge: fromB64u(o.challenge), allowCredentials: creds(o.allowCredentials) });
  }
  function creationOptions(o) {
    return Object.assign({}, o, {
      challenge: fromB64u(o.challenge),
      user: Object.assign({}, o.user, { id: fromB64u(o.user.id) }),
      excludeCredentials: creds(o.excludeCredentials),
    });
  }
  function asJSON(cred) {
    if (typeof cred.toJSON === 'function') return cred.toJSON();
    var r = cred.response, response = { clientDataJSON: toB64u(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = toB64u(r.attestationObject);
      response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      response.authenticatorData = toB64u(r.authenticatorData);
      response.signature = toB64u(r.signature);
      response.userHandle = toB64u(r.userHandle);
    }
    return {
      id: cred.id,
      rawId: toB64u(cred.rawId),
      type: cred.type,
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
      clientExtensionResults: cred.getClientExtensionResults(),
      response: response,
    };
  }
  function say(form, text) {
    var status = form.querySelector('[data-passkey-status]');
    if (status) status.textContent = text;
  }
  document.querySelectorAll('form[data-passkey]').forEach(function (form) {
    form.hidden = false;
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var button = form.querySelector('button');
      if (button) button.disabled = true;
      say(form, 'Waiting for your passkey…');
      var body = new URLSearchParams(new FormData(form));
      body.set('step', form.getAttribute('data-passkey-options'));
      fetch(form.action, { method: 'POST', body: body, credentials: 'same-origin', headers: { accept: 'application/json' } })
        .then(function (res) {
          // anything but JSON is a page: the form has expired (or the device cookie is gone)
          if (!/json/.test(res.headers.get('content-type') || '')) throw new Error('This page has expired. Reload it and try again.');
          return res.json().then(function (json) {
            if (!res.ok) throw new Error(json.message || 'The server refused the request.');
            return json;
          });
        })
        .then(function (options) {
          return form.getAttribute('data-passkey') === 'create'
            ? navigator.credentials.create({ publicKey: creationOptions(options) })
            : navigator.credentials.get({ publicKey: requestOptions(options) });
        })
        .then(function (cred) {
          if (!cred) throw new Error('No passkey was chosen.');
          form.querySelector('input[name=passkey_response]').value = JSON.stringify(asJSON(cred));
          var remember = document.getElementById('remember');
          if (remember && form.elements.remember) form.elements.remember.value = remember.checked ? 'on' : '';
          form.submit();
        })
        .catch(function (err) {
          if (button) button.disabled = false;
          say(form, err && err.name === 'NotAllowedError'
            ? 'The passkey request was cancelled or timed out. Try again, or use another way below.'
            : 'The passkey could not be used: ' + (err && err.message ? err.message : err));
        });
    });
  });
})();
`
