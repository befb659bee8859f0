import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { didYouMean, similar } from '../../errors/index.js'

// The near-miss rule behind "did you mean" in messages, the one the CLI's flag hints use.

describe('didYouMean', () => {
  it('suggests what is one or two edits away (a swap counts as one), and nothing for what is far', () => {
    assert.equal(didYouMean('modles', ['service', 'models', 'name']), ' (did you mean "models"?)')
    assert.equal(didYouMean('exlude', ['include', 'exclude']), ' (did you mean "exclude"?)')
    assert.deepEqual(similar('inculde', ['include', 'incxyde']), ['include'], 'a swap is one edit, not two')
    assert.equal(didYouMean('zzzzzz', ['models', 'name']), '')
    assert.equal(didYouMean('ab', ['xy']), '', 'a word mostly changed is no near miss')
    assert.equal(didYouMean('x', ['x', 'y']), '', 'no one-letter guesses')
  })

  it('ties are all named, sorted', () => {
    assert.equal(didYouMean('nme', ['nae', 'name']), ' (did you mean one of "nae", "name"?)')
  })
})
