// The sign-in views of /account: an account remembered on this device, handle and password, the
// second step when the account has a second factor, and the password again before a sensitive
// change. Only a passkey needs the page's script.
import { html, type SafeHtml } from '../../html.js'
import { layout } from '../../layout.js'
import type { DeviceAccount } from '../../devices.js'
import type { Factors } from '#src/account/factors/index.js'
import { credentialFields, initials } from '../../sign-in/fields.js'
import { form, messages, SCRIPT_PATH, type Common } from './common.js'

/** the accounts remembered on this device */
export function pickerPage(c: Common, accounts: DeviceAccount[]): SafeHtml {
  const rows = accounts.map(
    (a) =>
      html`<li>
        ${form(
          c,
          'select',
          html`<input type="hidden" name="did" value="${a.did}" /><button type="submit" class="account">
              <span class="initials" aria-hidden="true">${initials(a.handle)}</span><span>@${a.handle}</span>
            </button>`,
          html` class="pick"`,
        )}${form(
          c,
          'forget',
          html`<input type="hidden" name="did" value="${a.did}" /><button
              type="submit"
              class="link"
              aria-label="Forget @${a.handle} on this device"
            >
              Forget
            </button>`,
        )}
      </li>`,
  )
  return layout({
    title: 'Your account',
    server: c.server,
    body: html`<h1>Manage your account</h1>
      ${messages(c.flash)}
      <p>Choose an account:</p>
      <ul class="accounts" id="accounts">
        ${rows}
      </ul>
      <div class="links"><a href="/account?view=login" id="other-account">Use another account</a></div>`,
  })
}

export function loginPage(c: Common, p: { handle?: string; hasAccounts: boolean }): SafeHtml {
  return layout({
    title: 'Sign in',
    server: c.server,
    body: html`<h1>Sign in to manage your account</h1>
      ${messages(c.flash)}
      ${form(
        c,
        'sign-in',
        html`${credentialFields(p.handle)}
          <label class="check"><input type="checkbox" name="remember" value="on" checked /> Remember this account on this device</label>
          <div class="buttons"><button type="submit" class="primary">Sign in</button></div>`,
      )}
      <div class="links">
        <a href="/account/forgot">Forgot password?</a>${p.hasAccounts && html`<a href="/account">Back to saved accounts</a>`}
      </div>`,
  })
}

/** the second step of a sign-in: a code (app, email, recovery) or a passkey */
export function secondFactorPage(c: Common, p: { handle: string; factors: Factors }): SafeHtml {
  const f = p.factors
  const kinds = [
    f.totp && 'the code from your authenticator app',
    f.emailCode && 'the code we email you',
    f.recoveryCodesLeft > 0 && 'a recovery code',
  ]
    .filter(Boolean)
    .join(', or ')
  return layout({
    title: 'Second step',
    server: c.server,
    scripts: f.passkeys > 0 ? [SCRIPT_PATH] : undefined,
    body: html`<h1>Confirm it is you</h1>
      <p>Signing in as <strong>@${p.handle}</strong>.</p>
      ${messages(c.flash)}
      ${
        f.passkeys > 0 &&
        form(
          c,
          'sign-in/passkey',
          html`<input type="hidden" name="response" value="" />
            <p class="muted" data-needs-script>Using a passkey needs JavaScript, which is off or unavailable in this browser.</p>
            <div class="buttons">
              <button type="button" class="primary" data-passkey="authenticate" data-options="/account/sign-in/passkey-options" hidden>
                Use a passkey
              </button>
            </div>`,
          html` id="passkey-form"`,
        )
      }
      ${
        kinds &&
        form(
          c,
          'sign-in/code',
          html`<label for="code">Code <span class="hint">Enter ${kinds}.</span></label>
            <input
              type="text"
              id="code"
              name="code"
              autocomplete="one-time-code"
              autocapitalize="none"
              spellcheck="false"
              required
              autofocus
            />
            <div class="buttons"><button type="submit" class="primary">Continue</button></div>`,
        )
      }
      ${f.emailCode && form(c, 'sign-in/email-code', html`<button type="submit" class="link">Email me a code</button>`)}
      <div class="links"><a href="/account?view=login">Start again</a></div>`,
  })
}

/** the password again before a sensitive change */
export function confirmPage(c: Common, p: { handle: string; then: string }): SafeHtml {
  return layout({
    title: 'Confirm your password',
    server: c.server,
    body: html`<h1>Confirm your password</h1>
      <p>This change to <strong>@${p.handle}</strong> needs your password again.</p>
      ${messages(c.flash)}
      ${form(
        c,
        'confirm',
        html`<input type="hidden" name="then" value="${p.then}" />
          <label for="password">Password</label>
          <input type="password" id="password" name="password" autocomplete="current-password" required autofocus />
          <div class="buttons"><button type="submit" class="primary">Confirm</button><a class="button" href="/account">Cancel</a></div>`,
      )}`,
  })
}
