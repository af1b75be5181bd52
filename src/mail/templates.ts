// Plain-text messages, one per purpose: what the mail is for, the token on its own line, and what
// to do with it.
import type { Mail } from './message.js'

type Message = Pick<Mail, 'subject' | 'text'>

const footer = (hours: string) => `\n\nThe code works once and expires in ${hours}. If you did not ask for it, ignore this message.\n`

export function confirmEmailMail(token: string, handle: string): Message {
  return {
    subject: 'Confirm your email address',
    text:
      `Hello @${handle},\n\nTo confirm this email address for your account, enter this code in your app:\n\n${token}` + footer('24 hours'),
  }
}

export function updateEmailMail(token: string, handle: string, newEmail?: string): Message {
  const what = newEmail
    ? `To make ${newEmail} the email address of your account, enter this code in your app:`
    : 'To change the email address of your account, enter this code in your app together with the new address:'
  return {
    subject: 'Confirm your email address change',
    text: `Hello @${handle},\n\n${what}\n\n${token}` + footer('24 hours'),
  }
}

export function resetPasswordMail(token: string, handle: string): Message {
  return {
    subject: 'Reset your password',
    text:
      `Hello @${handle},\n\nTo choose a new password for your account, enter this reset code in your app:\n\n${token}` + footer('1 hour'),
  }
}

export function deleteAccountMail(token: string, handle: string): Message {
  return {
    subject: 'Confirm the deletion of your account',
    text:
      `Hello @${handle},\n\nTo delete your account permanently, enter this code in your app together with your password:\n\n${token}` +
      footer('1 hour'),
  }
}

export function plcOperationMail(token: string, handle: string): Message {
  return {
    subject: 'Confirm a change to your identity',
    text:
      `Hello @${handle},\n\nTo sign a change to your account's identity (DID) document, enter this code in your app:\n\n${token}` +
      footer('15 minutes'),
  }
}

export function signInCodeMail(code: string, handle: string): Message {
  return {
    subject: 'Your sign-in code',
    text:
      `Hello @${handle},\n\nSomeone signed in to your account with its password. To finish signing in, enter this code:\n\n${code}` +
      footer('15 minutes') +
      'If it was not you, change your password: whoever tried knows it.\n',
  }
}

/**
 * a credential of the account was added or changed: what, when, and where to look; never the
 * secret itself, and no code, so a forwarded notice gives nobody anything
 */
export function credentialChangedMail(headline: string, what: string, at: Date, handle: string, accountUrl: string): Message {
  const when = `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`
  return {
    subject: `Security notice: ${headline}`,
    text:
      `Hello @${handle},\n\n${capitalize(what)} on ${when}.\n\n` +
      `If this was you, there is nothing to do. If it was not, someone else can reach your account: ` +
      `sign in at ${accountUrl}, remove what you do not recognise and change your password.\n`,
  }
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)
