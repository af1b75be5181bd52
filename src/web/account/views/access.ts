// The sections of the account page that manage access: connected apps, app passwords, the email
// address, the handle and the password.
import { html, type SafeHtml } from '../../html.js'
import { form, sectionMessages, when, type AccountView, type Common } from './common.js'

export function appsSection(c: Common, a: AccountView): SafeHtml {
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

export function appPasswordsSection(c: Common, a: AccountView, canCreate: boolean): SafeHtml {
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

export function emailSection(c: Common, a: AccountView): SafeHtml {
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

export function handleSection(c: Common, a: AccountView): SafeHtml {
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
    ${
      a.didOutOfControl &&
      html`<p class="notice" id="plc-control">
        This server no longer holds a rotation key of your DID (${a.did}): you sign changes to it yourself. To change your handle, first put
        <code>at://</code> and the new handle first in your DID document's alsoKnownAs with your own key.
      </p>`
    }
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

export function passwordSection(c: Common): SafeHtml {
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
