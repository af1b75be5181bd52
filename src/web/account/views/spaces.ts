// The account page's Spaces section: the spaces a person created, and those they belong to or
// wrote in, each by its kind, its key and its owner.
import { html, type SafeHtml } from '../../html.js'
import type { SpaceView } from '../spaces.js'
import type { AccountView } from './common.js'

function item(s: SpaceView, owned: boolean): SafeHtml {
  const how = [s.member && 'member', s.wrote && 'you wrote here'].filter(Boolean).join(', ')
  return html`<li data-space="${s.uri}">
    <strong>${s.skey}</strong> <span class="muted">(${s.type})</span>
    ${!owned && html`<span>owned by ${s.owner ? `@${s.owner}` : s.authority}</span>`} ${how && html`<span class="muted">— ${how}</span>`}
    <p class="muted break"><code>${s.uri}</code></p>
  </li>`
}

export function spacesSection(a: AccountView): SafeHtml {
  const { owned, joined } = a.spaces ?? { owned: [], joined: [] }
  return html`<section class="card" id="spaces" aria-labelledby="spaces-h">
    <h2 id="spaces-h">Spaces</h2>
    <p class="muted">Shared, non-public data: spaces you created, and spaces you belong to or wrote in. Apps manage them.</p>
    <h3>Spaces you own</h3>
    ${
      owned.length
        ? html`<ul class="items" id="spaces-owned">
            ${owned.map((s) => item(s, true))}
          </ul>`
        : html`<p id="spaces-owned">You have not created a space.</p>`
    }
    <h3>Spaces you belong to</h3>
    ${
      joined.length
        ? html`<ul class="items" id="spaces-joined">
            ${joined.map((s) => item(s, false))}
          </ul>`
        : html`<p id="spaces-joined">You do not belong to or write in anyone else’s space here.</p>`
    }
  </section>`
}
