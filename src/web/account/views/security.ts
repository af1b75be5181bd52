// The second-factors section of the account page: email sign-in codes, an authenticator app
// (with its QR code while it is set up), passkeys and recovery codes.
import { html, raw, type SafeHtml } from '../../html.js'
import { form, sectionMessages, when, type AccountView, type Common } from './common.js'

export function securitySection(c: Common, a: AccountView, qrSvg: string | undefined): SafeHtml {
  const f = a.factors
  const codes = c.flash.recoveryCodes
  const totp = c.flash.totp
  const emailCodes = f.emailCode
    ? form(
        c,
        'factors/email',
        html`<input type="hidden" name="on" value="0" />
          <p>Email sign-in codes are <strong id="email-codes-state">on</strong>. <button type="submit">Turn off</button></p>`,
      )
    : a.emailConfirmed
      ? form(
          c,
          'factors/email',
          html`<input type="hidden" name="on" value="1" />
            <p>Email sign-in codes are <strong id="email-codes-state">off</strong>. <button type="submit">Turn on</button></p>`,
        )
      : html`<p>
          Email sign-in codes are <strong id="email-codes-state">off</strong>.
          <span class="muted">Confirm your email address to use them.</span>
        </p>`
  const app = f.totp
    ? form(
        c,
        'factors/totp/disable',
        html`<p>An authenticator app is <strong id="totp-state">on</strong>. <button type="submit" class="danger">Remove it</button></p>`,
      )
    : totp
      ? html`<div id="totp-setup">
          <p>Scan this code with your authenticator app, or type the key by hand.</p>
          <div class="qr" role="img" aria-label="QR code for your authenticator app">${raw(qrSvg ?? '')}</div>
          <p>Key: <span class="secret" id="totp-secret">${totp.secret}</span></p>
          ${form(
            c,
            'factors/totp/confirm',
            html`<label for="totp-code">The 6-digit code the app shows</label>
              <div class="inline">
                <input
                  type="text"
                  id="totp-code"
                  name="code"
                  inputmode="numeric"
                  autocomplete="one-time-code"
                  pattern="[0-9 ]{6,7}"
                  required
                  autofocus
                /><button type="submit" class="primary">Confirm and turn on</button>
              </div>`,
          )}
        </div>`
      : form(
          c,
          'factors/totp/begin',
          html`<p>An authenticator app is <strong id="totp-state">off</strong>. <button type="submit">Set up</button></p>`,
        )
  const keys = a.passkeys.map(
    (k) =>
      html`<li data-passkey-id="${k.id}">
        <div class="row">
          ${form(
            c,
            'passkeys/rename',
            html`<input type="hidden" name="id" value="${k.id}" /><label class="sr" for="pk-${k.id}">Name of passkey</label>
              <div class="inline">
                <input type="text" id="pk-${k.id}" name="name" value="${k.name}" maxlength="64" required /><button type="submit">
                  Rename
                </button>
              </div>`,
          )}${form(
            c,
            'passkeys/remove',
            html`<input type="hidden" name="id" value="${k.id}" /><button
                type="submit"
                class="danger"
                aria-label="Remove passkey ${k.name}"
              >
                Remove
              </button>`,
          )}
        </div>
        <p class="muted">Added ${when(k.createdAt)}, last used ${when(k.lastUsedAt)}</p>
      </li>`,
  )
  return html`<section class="card" id="security" aria-labelledby="security-h">
    <h2 id="security-h">Second factors</h2>
    ${sectionMessages(c, 'security')}
    <p class="muted">A second step after your password when you sign in to apps and here. App passwords skip it.</p>
    ${
      codes &&
      html`<div class="notice" role="status" id="recovery-codes">
        <p>Your recovery codes. Keep them somewhere safe: each works once, and they are shown only now.</p>
        <ol class="codes">
          ${codes.map((code) => html`<li>${code}</li>`)}
        </ol>
      </div>`
    }
    <h3>Email codes</h3>
    ${emailCodes}
    <h3>Authenticator app</h3>
    ${app}
    <h3>Passkeys</h3>
    ${
      a.passkeys.length
        ? html`<ul class="items" id="passkey-list">
            ${keys}
          </ul>`
        : html`<p id="passkey-list">No passkeys yet.</p>`
    }
    ${form(
      c,
      'passkeys/add',
      html`<input type="hidden" name="response" value="" />
        <label for="passkey-name">Name for a new passkey</label>
        <div class="inline">
          <input type="text" id="passkey-name" name="name" maxlength="64" placeholder="This laptop" /><button
            type="button"
            data-passkey="register"
            data-options="/account/passkeys/options"
            hidden
          >
            Add a passkey
          </button>
        </div>
        <p class="muted" data-needs-script>Adding a passkey needs JavaScript, which is off or unavailable in this browser.</p>`,
      html` id="passkey-form"`,
    )}
    ${
      (f.totp || f.passkeys > 0) &&
      html`<h3>Recovery codes</h3>
        <p>${f.recoveryCodesLeft} left.</p>
        ${form(c, 'factors/recovery', html`<button type="submit">Make new recovery codes</button>`)}`
    }
  </section>`
}
