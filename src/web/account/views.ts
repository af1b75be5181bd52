// The pages of /account, on the server's one layout: signing in (an account remembered on this
// device, or handle and password, then a second factor when the account has one), confirming the
// password before a sensitive change, and the account itself, one section per thing a person
// manages. Every action is a plain form posting to /account/<action>; only adding or using a
// passkey needs the page's script, and the page says so when it cannot run.
import { html, raw, type SafeHtml } from '../html.js'
import { layout, type ServerInfo } from '../layout.js'
import { CSRF_FIELD } from '../csrf.js'
import type { DeviceAccount } from '../devices.js'
import type { ConsentWords } from '../../oauth/consent-words.js'
import type { AppPasswordView } from '../../account/app-passwords.js'
import type { Factors, Passkey } from '../../account/factors/index.js'

export const SCRIPT_PATH = '/account/passkeys.js'

/** what a page shows once, after the form that made it (carried across the redirect) */
export type Flash = {
  notice?: string
  error?: string
  /** the section to scroll to */
  at?: string
  appPassword?: { name: string; password: string; privileged: boolean }
  recoveryCodes?: string[]
  totp?: { uri: string; secret: string }
  /** a domain the person tried as a handle: the records to publish name it */
  ownDomain?: string
}

export type Common = { server: ServerInfo; csrf: string; flash: Flash }

export type ConnectedAppView = { clientId: string; name: string; host: string; scope: string; words: ConsentWords; lastActiveAt: string }

export type AccountView = {
  did: string
  handle: string
  email: string | null
  emailConfirmed: boolean
  status: string
  /** when the password was last confirmed on this device, if recently enough for sensitive changes */
  unlockedUntil?: Date
  apps: ConnectedAppView[]
  appPasswords: AppPasswordView[]
  factors: Factors
  passkeys: Passkey[]
  handleDomains: string[]
  /** mailed tokens still waiting: a change of address (to which), a confirmation, a deletion */
  pending: { emailChange?: string; confirm: boolean; deletion: boolean }
}

const csrfField = (c: Common) => html`<input type="hidden" name="${CSRF_FIELD}" value="${c.csrf}" />`

function messages(f: Flash): SafeHtml {
  return html`${f.error && html`<p class="alert" role="alert" id="error" tabindex="-1">${f.error}</p>`}${
    f.notice && html`<p class="notice" role="status" id="notice" tabindex="-1">${f.notice}</p>`
  }`
}

/** the flash's messages inside the section its form belongs to */
const sectionMessages = (c: Common, id: string) => (c.flash.at === id ? messages(c.flash) : '')

/** a POST form to /account/<action> with the CSRF field */
function form(c: Common, action: string, body: SafeHtml, attrs: SafeHtml | string = ''): SafeHtml {
  return html`<form method="post" action="/account/${action}" ${attrs}>${csrfField(c)}${body}</form>`
}

const when = (iso: string | null | undefined) => (iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : 'never')

const initials = (handle: string) =>
  handle
    .split('.')
    .filter(Boolean)
    .slice(0, 2)
    .map((p) => p[0].toUpperCase())
    .join('')

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
        html`<label for="handle">Handle or email</label>
          <input
            type="text"
            id="handle"
            name="handle"
            value="${p.handle ?? ''}"
            autocomplete="username"
            autocapitalize="none"
            spellcheck="false"
            required${p.handle ? '' : html` autofocus`}
          />
          <label for="password">Password <span class="hint">Your account password; app passwords are not accepted here.</span></label>
          <input
            type="password"
            id="password"
            name="password"
            autocomplete="current-password"
            required${p.handle ? html` autofocus` : ''}
          />
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

function appsSection(c: Common, a: AccountView): SafeHtml {
  const items = a.apps.map(
    (app) =>
      html`<li data-client-id="${app.clientId}">
        <div class="row">
          <div><strong class="app-name">${app.name}</strong> <span class="muted break">${app.host}</span></div>
          ${form(
            c,
            'apps/revoke',
            html`<input type="hidden" name="client_id" value="${app.clientId}" /><button
                type="submit"
                class="danger"
                aria-label="Revoke access of ${app.name}"
              >
                Revoke
              </button>`,
          )}
        </div>
        <p class="muted">Last active ${when(app.lastActiveAt)}</p>
        <p>It can:</p>
        <ul class="app-permissions">
          ${app.words.sets.map((s) => html`<li>${s.title}</li>`)}${app.words.groups.flatMap((g) => g.items.map((i) => html`<li>${i}</li>`))}
        </ul>
        <details>
          <summary>Show the exact permissions</summary>
          <p><code>${app.scope}</code></p>
        </details>
      </li>`,
  )
  return html`<section class="card" id="apps" aria-labelledby="apps-h">
    <h2 id="apps-h">Connected apps</h2>
    ${sectionMessages(c, 'apps')}
    <p class="muted">Apps you allowed to use your account. Revoking signs the app out at once.</p>
    ${
      a.apps.length
        ? html`<ul class="items" id="app-list">
            ${items}
          </ul>`
        : html`<p id="app-list">No app is connected.</p>`
    }
  </section>`
}

function appPasswordsSection(c: Common, a: AccountView, canCreate: boolean): SafeHtml {
  const fresh = c.flash.appPassword
  const items = a.appPasswords.map(
    (p) =>
      html`<li data-name="${p.name}">
        <div class="row">
          <div>
            <strong>${p.name}</strong> ${p.privileged && html`<span class="badge warn">privileged</span>`}<br /><span class="muted"
              >Created ${when(p.createdAt)}</span
            >
          </div>
          ${form(
            c,
            'app-passwords/revoke',
            html`<input type="hidden" name="name" value="${p.name}" /><button
                type="submit"
                class="danger"
                aria-label="Revoke app password ${p.name}"
              >
                Revoke
              </button>`,
          )}
        </div>
      </li>`,
  )
  return html`<section class="card" id="app-passwords" aria-labelledby="app-passwords-h">
    <h2 id="app-passwords-h">App passwords</h2>
    ${sectionMessages(c, 'app-passwords')}
    <p class="muted">
      For apps that sign in with a password instead of asking you here. Each works like your password, except for account settings.
    </p>
    ${
      fresh &&
      html`<div class="notice" role="status" id="new-app-password">
        <p>Your new app password <strong>${fresh.name}</strong>. Copy it now: it is shown only once.</p>
        <p><span class="secret" id="app-password-value">${fresh.password}</span></p>
      </div>`
    }
    ${
      a.appPasswords.length
        ? html`<ul class="items" id="app-password-list">
            ${items}
          </ul>`
        : html`<p id="app-password-list">No app passwords yet.</p>`
    }
    ${
      canCreate &&
      form(
        c,
        'app-passwords/create',
        html`<label for="ap-name">Name <span class="hint">4 to 32 letters, digits, dots, dashes or underscores.</span></label>
          <input type="text" id="ap-name" name="name" pattern="[a-zA-Z0-9._\\-]{4,32}" required autocapitalize="none" spellcheck="false" />
          <label class="check"
            ><input type="checkbox" name="privileged" value="on" /> Privileged: may also manage the account's email, handle, app passwords
            and status</label
          >
          <div class="buttons"><button type="submit">Create app password</button></div>`,
      )
    }
  </section>`
}

function emailSection(c: Common, a: AccountView): SafeHtml {
  const state = a.email
    ? html`<p>
        Address: <strong id="email-address">${a.email}</strong> ${
          a.emailConfirmed
            ? html`<span class="badge" id="email-state">confirmed</span>`
            : html`<span class="badge warn" id="email-state">not confirmed</span>`
        }
      </p>`
    : html`<p id="email-address">No email address.</p>`
  const confirm =
    a.email &&
    !a.emailConfirmed &&
    html`${form(c, 'email/send-confirmation', html`<div class="buttons"><button type="submit">${a.pending.confirm ? 'Send a new code' : 'Send a confirmation code'}</button></div>`)}
    ${form(
      c,
      'email/confirm',
      html`<label for="confirm-token">Confirmation code from the email</label>
        <div class="inline">
          <input
            type="text"
            id="confirm-token"
            name="token"
            autocomplete="one-time-code"
            autocapitalize="characters"
            spellcheck="false"
            required
          /><button type="submit" class="primary">Confirm address</button>
        </div>`,
    )}`
  const change = a.pending.emailChange
    ? html`<p>
          A code to change the address to <strong>${a.pending.emailChange}</strong> was sent to
          ${a.emailConfirmed ? 'your current address' : 'the new address'}.
        </p>
        ${form(
          c,
          'email/change',
          html`<label for="change-token">Code from the email</label>
            <div class="inline">
              <input
                type="text"
                id="change-token"
                name="token"
                autocomplete="one-time-code"
                autocapitalize="characters"
                spellcheck="false"
                required
              /><button type="submit" class="primary">Change address</button>
            </div>`,
        )}`
    : ''
  return html`<section class="card" id="email" aria-labelledby="email-h">
    <h2 id="email-h">Email</h2>
    ${sectionMessages(c, 'email')} ${state}${confirm}${change}
    ${form(
      c,
      'email/change-request',
      html`<label for="new-email"
          >New address
          <span class="hint"
            >${
              a.emailConfirmed ? 'We send a code to your current address to approve the change.' : 'We send a code to the new address.'
            }</span
          ></label
        >
        <div class="inline">
          <input type="email" id="new-email" name="email" autocomplete="email" required /><button type="submit">Send code</button>
        </div>`,
    )}
  </section>`
}

function handleSection(c: Common, a: AccountView): SafeHtml {
  const domains = a.handleDomains
  const domainField =
    domains.length === 1
      ? html`<span class="muted">${domains[0]}</span><input type="hidden" name="domain" value="${domains[0]}" />`
      : html`<select name="domain" aria-label="Handle domain">
          ${domains.map((d) => html`<option value="${d}">${d}</option>`)}
        </select>`
  const own = c.flash.ownDomain
  const domain = own ?? 'your-domain.example'
  return html`<section class="card" id="handle" aria-labelledby="handle-h">
    <h2 id="handle-h">Handle</h2>
    ${sectionMessages(c, 'handle')}
    <p>Your handle is <strong id="current-handle">@${a.handle}</strong>.</p>
    ${form(
      c,
      'handle',
      html`<input type="hidden" name="kind" value="service" /><label for="handle-name">A handle on this server</label>
        <div class="suffix">
          <input type="text" id="handle-name" name="name" autocapitalize="none" spellcheck="false" required />${domainField}
        </div>
        <div class="buttons"><button type="submit">Change handle</button></div>`,
    )}
    ${form(
      c,
      'handle',
      html`<input type="hidden" name="kind" value="own" /><label for="own-domain">Your own domain</label>
        <p class="muted">First publish one of these, then verify:</p>
        <ul id="handle-records">
          <li>a DNS TXT record named <code>_atproto.${domain}</code> with the value <code>did=${a.did}</code></li>
          <li>or a file at <code>https://${domain}/.well-known/atproto-did</code> containing <code>${a.did}</code></li>
        </ul>
        <div class="inline">
          <input
            type="text"
            id="own-domain"
            name="domain"
            value="${own ?? ''}"
            placeholder="example.com"
            autocapitalize="none"
            spellcheck="false"
            required
          /><button type="submit">Verify and switch</button>
        </div>`,
    )}
  </section>`
}

function passwordSection(c: Common): SafeHtml {
  return html`<section class="card" id="password" aria-labelledby="password-h">
    <h2 id="password-h">Password</h2>
    ${sectionMessages(c, 'password')}
    <p class="muted">Changing it signs you out everywhere else: other browsers, apps and app sessions.</p>
    ${form(
      c,
      'password',
      html`<label for="current-password">Current password</label>
        <input type="password" id="current-password" name="current" autocomplete="current-password" required />
        <label for="new-password">New password <span class="hint">At least 8 characters.</span></label>
        <input type="password" id="new-password" name="password" autocomplete="new-password" minlength="8" required />
        <div class="buttons"><button type="submit" class="primary">Change password</button></div>`,
    )}
  </section>`
}

function securitySection(c: Common, a: AccountView, qrSvg: string | undefined): SafeHtml {
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

function statusSection(c: Common, a: AccountView): SafeHtml {
  const deactivated = a.status === 'deactivated'
  return html`<section class="card" id="status" aria-labelledby="status-h">
    <h2 id="status-h">Deactivate or delete</h2>
    ${sectionMessages(c, 'status')}
    ${
      deactivated
        ? html`<p>Your account is <strong id="account-status">deactivated</strong>: its posts are hidden from the network.</p>
            ${form(c, 'activate', html`<button type="submit" class="primary">Reactivate</button>`)}`
        : html`<p class="muted">Deactivating hides your account from the network until you reactivate it.</p>
            ${form(c, 'deactivate', html`<button type="submit" class="danger">Deactivate</button>`)}`
    }
    ${
      !deactivated &&
      html`
        <h3>Delete your account</h3>
        <p class="muted">Deleting is permanent. We email a code to ${a.email ?? 'your address'} to confirm it.</p>
        ${form(c, 'delete/request', html`<button type="submit" class="danger">${a.pending.deletion ? 'Send a new code' : 'Email me a deletion code'}</button>`)}
        ${
          a.pending.deletion &&
          form(
            c,
            'delete',
            html`<label for="delete-token">Code from the email</label>
              <input
                type="text"
                id="delete-token"
                name="token"
                autocomplete="one-time-code"
                autocapitalize="characters"
                spellcheck="false"
                required
              />
              <label for="delete-password">Password</label>
              <input type="password" id="delete-password" name="password" autocomplete="current-password" required />
              <div class="buttons"><button type="submit" class="danger primary">Delete my account</button></div>`,
          )
        }
      `
    }
  </section>`
}

export function accountPage(c: Common, a: AccountView, qrSvg?: string): SafeHtml {
  const unlocked = a.unlockedUntil
  return layout({
    title: 'Your account',
    server: c.server,
    wide: true,
    scripts: [SCRIPT_PATH],
    body: html`<div class="row"><h1>Your account</h1></div>
      <p>Signed in as <strong id="account-handle">@${a.handle}</strong> <span class="muted break">${a.did}</span></p>
      ${form(c, 'sign-out', html`<button type="submit" class="link">Sign out on this device</button>`)}
      <nav aria-label="Sections">
        <ul class="toc">
          <li><a href="#apps">Connected apps</a></li>
          <li><a href="#app-passwords">App passwords</a></li>
          <li><a href="#email">Email</a></li>
          <li><a href="#handle">Handle</a></li>
          <li><a href="#password">Password</a></li>
          <li><a href="#security">Second factors</a></li>
          <li><a href="#status">Deactivate or delete</a></li>
        </ul>
      </nav>
      ${!c.flash.at && messages(c.flash)}
      <p class="muted" id="unlock-state">
        ${
          unlocked
            ? `Your password was confirmed: sensitive changes need no password until ${unlocked.toISOString().slice(11, 16)} UTC.`
            : 'Sensitive changes (password, email, handle, second factors, app passwords, deactivating, deleting) ask for your password first.'
        }
      </p>
      ${
        a.status === 'deactivated'
          ? html`<p class="notice" id="deactivated">Your account is deactivated. Reactivate it to change its settings.</p>
              ${statusSection(c, a)}${appsSection(c, a)}${appPasswordsSection(c, a, false)}`
          : html`${appsSection(c, a)}${appPasswordsSection(c, a, true)}${emailSection(c, a)}${handleSection(c, a)}${passwordSection(c)}${securitySection(c, a, qrSvg)}${statusSection(c, a)}`
      }`,
  })
}

/** after the account was deleted */
export function deletedPage(server: ServerInfo): SafeHtml {
  return layout({
    title: 'Account deleted',
    server,
    body: html`<h1>Your account was deleted</h1>
      <p>Its data is no longer served. You were signed out on this device.</p>`,
  })
}
