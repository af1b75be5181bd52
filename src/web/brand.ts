// The operator's colours and logo as a stylesheet of their own, loaded after the main one so each
// colour overrides the default it replaces: primary for links, buttons and focus rings (its
// contrast colour for text on it), error, warning and success for the messages and badges that
// carry them, light and dark for the page's background and text. Values were checked to be hex
// colours at start, so they are safe to write into CSS.
import type { Branding } from '../config.js'

export function brandStylesheet(b: Pick<Branding, 'colors' | 'logoUrl'>): string {
  const c = b.colors
  const rules: string[] = []
  if (b.logoUrl) {
    rules.push('header.site .brand{display:inline-flex;align-items:center;gap:.5rem;color:inherit;text-decoration:none}')
    rules.push('header.site .logo{height:2rem;width:auto;max-width:8rem;object-fit:contain}')
  }
  if (c.light) rules.push(`body{background:${c.light}}`)
  if (c.dark) rules.push(`body,header.site,.account,input[type=text],input[type=password],input[type=email],select{color:${c.dark}}`)
  if (c.primary) {
    const on = c.primaryContrast ?? '#ffffff'
    rules.push(`a,summary,button.link{color:${c.primary}}`)
    rules.push(`a:hover{color:${c.primary};opacity:.85}`)
    rules.push(`:focus-visible{outline-color:${c.primary}}`)
    rules.push(`button,.button{border-color:${c.primary};color:${c.primary}}`)
    rules.push(`button.primary,button.primary:hover{background:${c.primary};color:${on}}`)
    rules.push(`.initials{background:${c.primary};color:${on}}`)
  } else if (c.primaryContrast) {
    rules.push(`button.primary,button.primary:hover,.initials{color:${c.primaryContrast}}`)
  }
  if (c.error) {
    const on = c.errorContrast ?? '#ffffff'
    rules.push(`.alert{border-color:${c.error};color:${c.error}}`)
    rules.push(`button.danger{border-color:${c.error};color:${c.error}}`)
    rules.push(`button.danger.primary{background:${c.error};color:${on}}`)
  }
  if (c.warning) rules.push(`.badge.warn{border-color:${c.warning};color:${c.warningContrast ?? c.warning}}`)
  if (c.success) rules.push(`.notice,.badge{border-color:${c.success};color:${c.successContrast ?? c.success}}`)
  return rules.join('\n') + '\n'
}
