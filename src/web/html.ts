// HTML built by one tagged template: every interpolated value is escaped unless it is already
// markup made by this template, so a page cannot forget to escape what a user or a client sent.

/** markup this module produced: inserted as is */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** text made safe for element content and quoted attribute values */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ENTITIES[c])

type Part = SafeHtml | string | number | boolean | null | undefined | Part[]

function render(v: Part): string {
  if (v === null || v === undefined || v === false || v === true) return ''
  if (v instanceof SafeHtml) return v.value
  if (Array.isArray(v)) return v.map(render).join('')
  return escapeHtml(String(v))
}

/** `html\`<p>${name}</p>\``: strings are escaped, nested `html` values and arrays of them are not;
 *  null, undefined and booleans render nothing (so `${cond && html\`…\`}` works) */
export function html(strings: TemplateStringsArray, ...values: Part[]): SafeHtml {
  let out = strings[0]
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]
  return new SafeHtml(out)
}

/** markup from a trusted constant (never from input) */
export const raw = (s: string) => new SafeHtml(s)
